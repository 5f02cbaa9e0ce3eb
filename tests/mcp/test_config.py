"""``MCP_SERVERS`` settings: parsing, the rules of an entry, the checks, life without the SDK."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from llm_conversations.checks import check_mcp_servers, check_settings
from llm_conversations.tools import default_registry
from llm_conversations.tools.mcp_config import (
    MISSING_SDK,
    McpServer,
    McpUnavailable,
    ToolRules,
    configured_servers,
    mcp_installed,
    mcp_server_problems,
)
from tests.mcp.conftest import missing_requirements, sdk_module

ROOT = Path(__file__).resolve().parents[2]
UNSET = "LLMCONV_TEST_UNSET_VARIABLE"


def ids(entry: Any, name: Any = "s", environment: bool = False) -> list[str]:
    return [p.id for p in mcp_server_problems(entry, name, environment=environment)]


def check_ids(servers: Any) -> list[str]:
    with override_settings(LLM_CONVERSATIONS={"MCP_SERVERS": servers}):
        return [message.id for message in check_mcp_servers()]


@pytest.fixture
def without_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import mcp`` fails, as where the extra is not installed."""
    monkeypatch.setitem(sys.modules, "mcp", None)


# Parsing ----------------------------------------------------------------------


def test_a_stdio_entry_takes_the_tool_timeout_and_per_tool_rules_inherit() -> None:
    servers = {
        "fs": {
            "COMMAND": "mcp-fs",
            "ARGS": ["--root", "/srv"],
            "ENV": {"FS_TOKEN": "MY_FS_TOKEN"},
            "REQUIRES_APPROVAL": True,
            "TOOLS": {"read": {"REQUIRES_APPROVAL": False}, "slow": {"TIMEOUT": 300}},
        }
    }
    with override_settings(LLM_CONVERSATIONS={"MCP_SERVERS": servers, "TOOL_TIMEOUT": 40}):
        [server] = configured_servers()
    assert (server.name, server.command, server.args, server.url) == (
        "fs",
        "mcp-fs",
        ("--root", "/srv"),
        None,
    )
    assert server.env == {"FS_TOKEN": "MY_FS_TOKEN"}
    assert server.rules_for("write") == ToolRules(requires_approval=True, timeout=40)
    assert server.rules_for("read") == ToolRules(requires_approval=False, timeout=40)
    assert server.rules_for("slow") == ToolRules(requires_approval=True, timeout=300)
    assert server.tool_name("read") == "fs__read"


def test_an_http_entry_and_defaults() -> None:
    servers = {"docs": {"URL": "https://mcp.example.com/mcp", "HEADERS": {"X-Key": "K"}}}
    with override_settings(LLM_CONVERSATIONS={"MCP_SERVERS": servers}):
        [server] = configured_servers()
    assert (server.command, server.url, server.headers) == (
        None,
        "https://mcp.example.com/mcp",
        {"X-Key": "K"},
    )
    assert server.rules == ToolRules(timeout=120.0)
    assert server.include is None


def test_values_come_from_the_environment_and_a_missing_one_is_named_not_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_KEY", "s3cret")
    server = McpServer("docs", url="http://x/mcp", headers={"Authorization": "MY_KEY"})
    assert server.values(server.headers, "HEADERS") == {"Authorization": "s3cret"}
    assert server.secrets() == ["s3cret"]
    missing = McpServer("docs", url="http://x/mcp", headers={"Authorization": UNSET})
    with pytest.raises(McpUnavailable) as caught:
        missing.values(missing.headers, "HEADERS")
    assert caught.value.message == (
        f"The MCP server 'docs' cannot be used: the environment variable {UNSET} "
        "(HEADERS) is not set."
    )
    assert caught.value.code == "mcp_unavailable"


def test_bad_settings_are_improperly_configured_with_the_check_message() -> None:
    with override_settings(LLM_CONVERSATIONS={"MCP_SERVERS": {"s": {"URL": "ftp://x"}}}):
        with pytest.raises(ImproperlyConfigured, match="URL must be an http"):
            configured_servers()
        with pytest.raises(ImproperlyConfigured, match="URL must be an http"):
            default_registry()
    with (
        override_settings(LLM_CONVERSATIONS={"MCP_SERVERS": ["s"]}),
        pytest.raises(ImproperlyConfigured, match="must be a dict"),
    ):
        configured_servers()


# The rules of one entry (E030-E034) -------------------------------------------


@pytest.mark.parametrize("name", ["", "a.b", "a b", "x" * 33, 7])
def test_e030_a_name_that_cannot_prefix_tool_names(name: Any) -> None:
    assert ids({"COMMAND": "x"}, name) == ["llm_conversations.E030"]


def test_e030_an_entry_that_is_not_a_dict() -> None:
    assert ids("npx server") == ["llm_conversations.E030"]


@pytest.mark.parametrize(
    "entry",
    [
        {},
        {"COMMAND": "x", "URL": "http://h/mcp"},
        {"COMMAND": ""},
        {"COMMAND": "x", "ARGS": "--flag"},
        {"COMMAND": "x", "CWD": 1},
        {"COMMAND": "x", "HEADERS": {}},
        {"URL": "mcp.example.com"},
        {"URL": "https://user:pw@mcp.example.com/mcp"},
        {"URL": "http://h/mcp", "ARGS": []},
    ],
)
def test_e031_the_transport(entry: dict[str, Any]) -> None:
    assert ids(entry) == ["llm_conversations.E031"]


def test_e032_unknown_keys_of_an_entry_and_of_a_tool() -> None:
    assert ids({"COMMAND": "x", "COMAND": "y"}) == ["llm_conversations.E032"]
    assert ids({"COMMAND": "x", "TOOLS": {"t": {"APPROVAL": True}}}) == ["llm_conversations.E032"]


@pytest.mark.parametrize(
    "options",
    [
        {"TIMEOUT": 0},
        {"TIMEOUT": None},
        {"TIMEOUT": float("inf")},
        {"TIMEOUT": True},
        {"REQUIRES_APPROVAL": "yes"},
        {"CLIENT_SIDE": 1},
        {"REPEATABLE": None},
        {"OFFER_BY_DEFAULT": "yes"},
        {"INCLUDE": "echo"},
        {"TOOLS": ["echo"]},
        {"TOOLS": {"echo": True}},
        {"TOOLS": {"echo": {"TIMEOUT": -1}}},
    ],
)
def test_e033_options(options: dict[str, Any]) -> None:
    assert ids({"COMMAND": "x", **options}) == ["llm_conversations.E033"]


@pytest.mark.parametrize(
    "entry",
    [
        {"COMMAND": "x", "ENV": [("TOKEN", "MY_TOKEN")]},
        {"COMMAND": "x", "ENV": {"TOKEN": ""}},
        {"URL": "http://h/mcp", "HEADERS": {"Authorization": 1}},
        {"URL": "http://h/mcp", "HEADERS": {"Authorization": "Bearer sk-live-123"}},
    ],
)
def test_e034_env_and_headers_map_names_to_variable_names(entry: dict[str, Any]) -> None:
    assert ids(entry, environment=True) == ["llm_conversations.E034"]
    # A secret written in by mistake is not repeated in the check's words.
    assert "sk-live" not in str(mcp_server_problems(entry, "s", environment=True))


def test_e034_a_variable_that_is_not_set_only_in_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = {"URL": "http://h/mcp", "HEADERS": {"Authorization": UNSET}}
    assert ids(entry) == []
    assert ids(entry, environment=True) == ["llm_conversations.E034"]
    [problem] = mcp_server_problems(entry, "s", environment=True)
    assert UNSET in problem.message
    monkeypatch.setenv(UNSET, "set now")
    assert ids(entry, environment=True) == []


def test_valid_entries_have_no_problems() -> None:
    assert ids({"COMMAND": "npx", "ARGS": ["-y", "pkg"], "ENV": {}, "CWD": "/tmp"}) == []
    assert (
        ids(
            {
                "URL": "https://h/mcp",
                "TIMEOUT": 5,
                "INCLUDE": ["echo"],
                "CLIENT_SIDE": False,
                "TOOLS": {"echo": {"REQUIRES_APPROVAL": True, "REPEATABLE": False, "TIMEOUT": 1.5}},
            }
        )
        == []
    )


# The check (E030, E035) and MCP_TOOLS_TTL (E005) ------------------------------


def test_the_check_reports_each_entry_and_a_settings_value_that_is_not_a_dict() -> None:
    assert check_ids({}) == []
    assert check_ids(["x"]) == ["llm_conversations.E030"]
    assert check_ids({"a": {"COMMAND": "x"}, "b": {}, "c.d": {}}) == [
        "llm_conversations.E031",
        "llm_conversations.E030",
    ]


@pytest.mark.usefixtures("without_sdk")
def test_e035_servers_without_the_sdk() -> None:
    assert not mcp_installed()
    assert check_ids({}) == []
    assert check_ids({"s": {"COMMAND": "x"}}) == ["llm_conversations.E035"]
    with (
        override_settings(LLM_CONVERSATIONS={"MCP_SERVERS": {"s": {"COMMAND": "x"}}}),
        pytest.raises(ImproperlyConfigured) as caught,
    ):
        default_registry()
    assert str(caught.value) == MISSING_SDK
    assert "pip install 'llm-conversations[mcp]'" in MISSING_SDK


@pytest.mark.usefixtures("without_sdk")
def test_without_the_sdk_and_without_servers_the_registry_works() -> None:
    with override_settings(LLM_CONVERSATIONS={"TOOLS": ["tests.support.loop_tools.get_time"]}):
        assert default_registry().names() == ["get_time"]


@pytest.mark.parametrize("value", [0, None, "300", True])
def test_the_tool_list_ttl_is_a_positive_duration(value: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"MCP_TOOLS_TTL": value}):
        assert [m.id for m in check_settings()] == ["llm_conversations.E005"]
    with override_settings(LLM_CONVERSATIONS={"MCP_TOOLS_TTL": 0.5}):
        assert check_settings() == []


def test_the_app_imports_and_checks_without_the_sdk() -> None:
    """Every module but the SDK bridge imports, and ``check`` passes, where ``mcp`` cannot."""
    script = """
import importlib, pkgutil, sys
sys.modules["mcp"] = None
import django
django.setup()
import llm_conversations
from django.core.management import call_command
# The database task worker needs django-tasks-db, which these settings leave out;
# the Agents SDK (the "agents" extra) needs mcp itself.
WORKER = ("llm_conversations.management.llm_worker_command", "llm_conversations.tasks.worker")
NEEDS_MCP = ("llm_conversations.tools.mcp_client", "llm_conversations.frameworks.agents")
for module in pkgutil.walk_packages(llm_conversations.__path__, "llm_conversations."):
    if module.name not in NEEDS_MCP and module.name not in WORKER:
        importlib.import_module(module.name)
call_command("check", "--fail-level", "ERROR")
from llm_conversations.tools import default_registry
print(default_registry().names(), "mcp_client" in str(sorted(sys.modules)))
"""
    completed = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip().splitlines()[-1] == (
        "['get_weather', 'get_time', 'delete_file', 'pick_color'] False"
    )


# When the tests that need the reference server run, skip or fail ---------------


def test_the_reference_server_tests_run_skip_locally_or_fail_under_ci(tmp_path: Path) -> None:
    everything = tmp_path / "index.js"
    everything.touch()
    ready = {"node": "/usr/bin/node", "everything": everything, "sdk": True}
    assert missing_requirements({"CI": "true"}, **ready) == ("run", "")
    for missing, words in [
        ({"node": None}, "node is not on PATH"),
        ({"everything": tmp_path / "absent.js"}, "npm ci --prefix tests"),
        ({"sdk": False}, "the mcp package is not installed"),
    ]:
        action, reason = missing_requirements({}, **{**ready, **missing})
        assert action == "skip"
        assert words in reason
        assert "under CI=true they fail" in reason
        action, reason = missing_requirements({"CI": "true"}, **{**ready, **missing})
        assert action == "fail"
        assert words in reason
        assert "may not be skipped" in reason


@pytest.mark.usefixtures("without_sdk")
def test_modules_that_import_the_sdk_skip_locally_and_fail_under_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="mcp package is not installed"):
        sdk_module("llm_conversations.tools.mcp_client")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="may not be skipped"):
        sdk_module("llm_conversations.tools.mcp_client")
