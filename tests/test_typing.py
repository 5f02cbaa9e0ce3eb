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


def test_a_project_type_checks_against_the_installed_app(tmp_path: Path) -> None:
    _needs("mypy")
    _needs("mypy_django_plugin")
    (tmp_path / "members").mkdir()
    (tmp_path / "members" / "__init__.py").write_text("")
    (tmp_path / "members" / "models.py").write_text(MEMBER_MODEL)
    (tmp_path / "consumer_settings.py").write_text(SETTINGS)
    (tmp_path / "uses_the_app.py").write_text(USES_THE_APP)
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
    output = result.stdout + result.stderr
    assert "import-not-found" not in output, (
        "mypy cannot find the installed llm_conversations; an editable install must be "
        "strict (pip install -e . --config-settings editable_mode=strict):\n" + output
    )
    assert "import-untyped" not in output, "py.typed is not honoured:\n" + output
    assert result.returncode == 0, output
    revealed = re.findall(r'uses_the_app\.py:(\d+): note: Revealed type is "([^"]+)"', output)
    assert [type_ for _, type_ in revealed] == [
        "members.models.Member | None",
        "members.models.Member | django.contrib.auth.models.AnonymousUser",
        "llm_conversations.core.messages.ChatMessage",
    ], output
