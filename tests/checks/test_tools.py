"""``checks/tools.py``: E020-E023, the TOOLS and DEFAULT_TOOLS settings (MCP_SERVERS'
entries, E030-E035: the table of tests/checks/broken.py and tests/mcp/test_config.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from llm_conversations.checks import check_tools
from tests.checks.broken import FIXTURES


def tools_settings(*paths: Any) -> override_settings:
    return override_settings(LLM_CONVERSATIONS={"TOOLS": list(paths)})


def test_valid_tools_pass() -> None:
    with tools_settings(f"{FIXTURES}.add", f"{FIXTURES}.shout", f"{FIXTURES}.pick_colour"):
        assert check_tools() == []


def test_e020_unimportable_or_not_a_tool() -> None:
    with tools_settings("no_such_module.tool", f"{FIXTURES}.NOT_A_TOOL", f"{FIXTURES}.add", 7):
        messages = check_tools()
    assert [m.id for m in messages] == ["llm_conversations.E020"] * 3
    assert "'no_such_module.tool'" in messages[0].msg
    assert "is a int, not a Tool or a function" in (messages[1].hint or "")
    assert messages[2].msg == "LLM_CONVERSATIONS['TOOLS'] entry 7 is not a dotted path."


def test_e020_tools_not_a_list() -> None:
    with override_settings(LLM_CONVERSATIONS={"TOOLS": f"{FIXTURES}.add"}):
        assert [m.id for m in check_tools()] == ["llm_conversations.E020"]


def test_e021_duplicate_names() -> None:
    with tools_settings(f"{FIXTURES}.add", f"{FIXTURES}.another_add"):
        messages = check_tools()
    assert [m.id for m in messages] == ["llm_conversations.E021"]
    assert messages[0].msg == "LLM_CONVERSATIONS['TOOLS'] has two tools named 'add'."


def defaults_ids(names: Any, **more: Any) -> list[str]:
    config = {"TOOLS": [f"{FIXTURES}.add", f"{FIXTURES}.shout"], "DEFAULT_TOOLS": names, **more}
    with override_settings(LLM_CONVERSATIONS=config):
        return [m.id for m in check_tools()]


@pytest.mark.parametrize("names", ["add", [1], {"add": True}, ("add", None)])
def test_e022_default_tools_none_or_a_list_of_names(names: Any) -> None:
    assert defaults_ids(names) == ["llm_conversations.E022"]


def test_e023_default_tools_names_only_tools() -> None:
    servers = {"MCP_SERVERS": {"files": {"COMMAND": "x"}}}
    assert (
        defaults_ids(["add", "shuot", "files__read", "other__read"], **servers)
        == ["llm_conversations.E023"] * 2
    )
    assert defaults_ids(["files__read"]) == ["llm_conversations.E023"]


@pytest.mark.parametrize("names", [None, [], ["shout"], ("add", "files__read")])
def test_default_tools_may_be_all_none_or_named_tools(names: Any) -> None:
    assert defaults_ids(names, MCP_SERVERS={"files": {"COMMAND": "x"}}) == []
