"""A project that installs the app sees its types: mypy on a file outside the checkout.

The file lives in a throwaway project (its own settings, a custom user model)
and imports ``llm_conversations`` from this environment's install, the
editable one of requirements.txt (``editable_mode=strict``) or a wheel: mypy
must find the package (no ``import-not-found``), honour its ``py.typed`` (no
``import-untyped``), and resolve the user types of ``llm_conversations.users``
to that project's user model. Without mypy the test skips; under ``CI=true``
it fails instead, since requirements.txt installs mypy.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SETTINGS = """
SECRET_KEY = "typing"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "rest_framework",
    "llm_conversations",
    "members",
]
AUTH_USER_MODEL = "members.Member"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
"""

MEMBER_MODEL = """
from django.contrib.auth.models import AbstractUser
from django.db import models


class Member(AbstractUser):
    nickname = models.CharField(max_length=40, blank=True)
"""

# What a project writes against the app: a tool reading its caller, a policy,
# a conversation of one of its users.
USES_THE_APP = """
from collections.abc import Collection

from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ChatMessage
from llm_conversations.runs.policy import RunPolicy
from llm_conversations.tools import ToolContext, tool
from llm_conversations.users import AnyUser
from members.models import Member


@tool
def my_nickname(context: ToolContext) -> str:
    reveal_type(context.user)
    return "" if context.user is None else context.user.nickname


class StaffOnly(RunPolicy):
    def allowed_tools(self, user: AnyUser) -> Collection[str] | None:
        reveal_type(user)
        return None if user.is_staff else ()


def start(member: Member) -> None:
    reveal_type(ChatMessage.user("hello"))
    create_conversation(owner=member, title="typed")
"""

MYPY_CONFIG = """
[mypy]
strict = True
plugins = mypy_django_plugin.main

[mypy.plugins.django-stubs]
django_settings_module = consumer_settings
"""


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is not None:
        return
    reason = f"{module} is not installed (requirements.txt installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}. CI=true: the typing test may not be skipped.", pytrace=False)
    pytest.skip(reason)


def _mypy(tmp_path: Path, source: str) -> tuple[int, str]:
    """mypy's exit code and output on ``uses_the_app.py`` holding ``source``, in a project."""
    _needs("mypy")
    _needs("mypy_django_plugin")
    (tmp_path / "members").mkdir()
    (tmp_path / "members" / "__init__.py").write_text("")
    (tmp_path / "members" / "models.py").write_text(MEMBER_MODEL)
    (tmp_path / "consumer_settings.py").write_text(SETTINGS)
    (tmp_path / "uses_the_app.py").write_text(source)
    (tmp_path / "mypy.ini").write_text(MYPY_CONFIG)
    # Nothing points into the checkout: the package is found only where it is installed.
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "MYPYPATH", "DJANGO_SETTINGS_MODULE"}
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            "mypy.ini",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "--python-executable",
            sys.executable,
            "uses_the_app.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


def _revealed(output: str) -> list[str]:
    return re.findall(r'uses_the_app\.py:\d+: note: Revealed type is "([^"]+)"', output)


def test_a_project_type_checks_against_the_installed_app(tmp_path: Path) -> None:
    returncode, output = _mypy(tmp_path, USES_THE_APP)
    assert "import-not-found" not in output, (
        "mypy cannot find the installed llm_conversations; an editable install must be "
        "strict (pip install -e . --config-settings editable_mode=strict):\n" + output
    )
    assert "import-untyped" not in output, "py.typed is not honoured:\n" + output
    assert returncode == 0, output
    assert _revealed(output) == [
        "members.models.Member | None",
        "members.models.Member | django.contrib.auth.models.AnonymousUser",
        "llm_conversations.core.messages.ChatMessage",
    ], output


# A tool keeps its function's signature, and a run's options their types: each line marked
# ``# error: CODE`` must be the error mypy reports there, and no other line may fail.
TYPED_USES = """
from llm_conversations.models import Conversation
from llm_conversations.providers import get_provider
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.forks import regenerate
from llm_conversations.tools import tool


@tool
def add(a: int, b: int = 0) -> int:
    return a + b


@tool(requires_approval=True)
async def fetch(url: str) -> bytes:
    return url.encode()


reveal_type(add)
reveal_type(add(1, b=2))
reveal_type(fetch)
add("one")  # error: arg-type
add(1, c=2)  # error: call-arg


def answer(service: ToolLoopService, conversation: Conversation) -> None:
    service.send(conversation, "hi", temperature=0.2, max_iterations=3, tools=["add"])
    service.send(conversation, "hi", temperature="hot")  # error: arg-type
    service.send(conversation, "hi", temprature=0.2)  # error: call-arg
    service.start(conversation, "hi", seed="42")  # error: arg-type
    regenerate(service, conversation, "id", top_p="high")  # error: arg-type
    get_provider().complete([], parameters={"temperature": "hot"})  # error: arg-type
"""


def test_tools_keep_their_signature_and_run_options_are_typed(tmp_path: Path) -> None:
    returncode, output = _mypy(tmp_path, TYPED_USES)
    assert "import-not-found" not in output, output
    assert _revealed(output) == [
        "llm_conversations.tools.definition.Tool[[a: int, b: int =], int]",
        "int",
        "llm_conversations.tools.definition.Tool[[url: str], typing.Coroutine[Any, Any, bytes]]",
    ], output
    expected = {
        (number, line.split("# error: ")[1])
        for number, line in enumerate(TYPED_USES.splitlines(), start=1)
        if "# error: " in line
    }
    reported = {
        (int(number), code)
        for number, code in re.findall(
            r"uses_the_app\.py:(\d+): error: .*\[([\w-]+)\]$", output, re.M
        )
    }
    assert len(expected) == 7
    assert reported == expected, output
    assert returncode == 1
