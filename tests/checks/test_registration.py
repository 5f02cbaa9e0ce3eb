"""The checks package (``llm_conversations/checks/__init__.py``): every check registered with
its tags, and every id reported by ``run_checks()`` and ``manage.py check``."""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
import re
import sys
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.checks.registry import registry
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from llm_conversations import checks
from llm_conversations.checks import (
    check_attachments,
    check_installation,
    check_mcp_servers,
    check_providers,
    check_run_limits,
    check_settings,
    check_share_links,
    check_tools,
    check_trash,
    check_webhooks,
)
from llm_conversations.providers import entries as provider_entries
from llm_conversations.tools import mcp_config
from tests.checks.broken import BROKEN, BROKEN_PROJECT, ID


@pytest.fixture
def without_sdk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """For E035, ``import mcp`` fails as where the extra is not installed."""
    if request.node.callspec.params.get("check_id") == "llm_conversations.E035":
        monkeypatch.setitem(sys.modules, "mcp", None)


@pytest.mark.parametrize(
    "check",
    [
        check_settings,
        check_providers,
        check_tools,
        check_mcp_servers,
        check_run_limits,
        check_attachments,
        check_webhooks,
        check_share_links,
        check_trash,
        check_installation,
    ],
)
def test_each_check_is_registered(check: Any) -> None:
    assert check in registry.get_checks()
    # With the app's tag: `manage.py check --tag llm_conversations` selects them.
    assert checks.TAG in check.tags


def test_every_check_the_app_registers_has_a_tag() -> None:
    # Any check of the package, so one registered later outside apps.ready()'s list
    # counts too: an untagged check escapes `manage.py check --tag llm_conversations`.
    ours = [
        check
        for check in registry.get_checks(include_deployment_checks=True)
        if check.__module__.partition(".")[0] == "llm_conversations"
    ]
    assert len(ours) >= 10
    assert [check.__qualname__ for check in ours if checks.TAG not in check.tags] == []


def test_every_id_in_the_code_has_a_broken_setting_here() -> None:
    # Every module of the checks package, so an id in a module added later counts too.
    parts = [
        importlib.import_module(f"{checks.__name__}.{module.name}")
        for module in pkgutil.iter_modules(checks.__path__)
    ]
    assert len(parts) > 1
    sources = (checks, *parts, provider_entries, mcp_config)
    source = "".join(inspect.getsource(module) for module in sources)
    assert set(ID.findall(source)) == set(BROKEN) | set(BROKEN_PROJECT)


# Django 6.1 runs the model checks against the database (JSONField support).
@pytest.mark.django_db
@pytest.mark.usefixtures("without_sdk")
@pytest.mark.parametrize("check_id", sorted(BROKEN))
def test_run_checks_reports_each_id(check_id: str) -> None:
    value, debug = BROKEN[check_id]
    with override_settings(LLM_CONVERSATIONS=value, DEBUG=debug):
        reported = {message.id for message in run_checks()}
    assert check_id in reported


# Django 6.1 runs the model checks against the database (JSONField support).
@pytest.mark.django_db
@pytest.mark.usefixtures("without_sdk")
@pytest.mark.parametrize("check_id", sorted(BROKEN))
def test_manage_py_check_reports_each_id(check_id: str) -> None:
    value, debug = BROKEN[check_id]
    stderr = io.StringIO()
    with override_settings(LLM_CONVERSATIONS=value, DEBUG=debug):
        if check_id.startswith("llm_conversations.E"):
            with pytest.raises(SystemCheckError, match=re.escape(check_id)):
                call_command("check", stderr=stderr)
        else:
            call_command("check", stderr=stderr)
            assert check_id in stderr.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize("check_id", ["llm_conversations.E003", "llm_conversations.E015"])
def test_manage_py_check_with_the_apps_tag_runs_the_apps_checks(check_id: str) -> None:
    value, debug = BROKEN[check_id]
    with (
        override_settings(LLM_CONVERSATIONS=value, DEBUG=debug),
        pytest.raises(SystemCheckError, match=re.escape(check_id)),
    ):
        call_command("check", "--tag", checks.TAG)


# Django 6.1 runs the model checks against the database (JSONField support).
@pytest.mark.django_db
def test_manage_py_check_is_quiet_for_valid_settings() -> None:
    stderr = io.StringIO()
    with override_settings(LLM_CONVERSATIONS={}, DEBUG=True):
        call_command("check", stderr=stderr)
    assert not ID.findall(stderr.getvalue())
