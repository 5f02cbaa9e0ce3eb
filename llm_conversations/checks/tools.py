"""E020-E023, E030-E035: ``TOOLS``, ``DEFAULT_TOOLS`` and ``MCP_SERVERS``.

Tools are imported to be checked; MCP servers are not started.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage, Error

from llm_conversations.checks.values import as_check_message, wrong_type
from llm_conversations.conf import raw_setting
from llm_conversations.tools import ToolError, load_tool
from llm_conversations.tools.mcp_config import (
    MISSING_SDK,
    SEPARATOR,
    mcp_installed,
    mcp_server_problems,
)

__all__ = ["check_mcp_servers", "check_tools"]


def check_tools(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E020 an entry that cannot be imported or is not a tool; E021 duplicate tool names;
    E022 and E023 ``DEFAULT_TOOLS``."""
    paths = raw_setting("TOOLS")
    if isinstance(paths, str) or not isinstance(paths, list | tuple):
        return wrong_type(
            "LLM_CONVERSATIONS['TOOLS']", "a list of dotted paths", paths, "llm_conversations.E020"
        )
    errors: list[CheckMessage] = []
    seen: dict[str, str] = {}
    for path in paths:
        if not isinstance(path, str):
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] entry {path!r} is not a dotted path.",
                    id="llm_conversations.E020",
                )
            )
            continue
        try:
            loaded = load_tool(path)
        except ToolError as exc:
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] entry {path!r} is not a usable tool.",
                    hint=exc.message,
                    id="llm_conversations.E020",
                )
            )
            continue
        except Exception as exc:  # the module itself fails to import
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] entry {path!r} cannot be imported.",
                    hint=f"{type(exc).__name__}: {exc}",
                    id="llm_conversations.E020",
                )
            )
            continue
        if loaded.name in seen:
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] has two tools named {loaded.name!r}.",
                    hint=f"{seen[loaded.name]!r} and {path!r}; pass name= to @tool to rename one.",
                    id="llm_conversations.E021",
                )
            )
        else:
            seen[loaded.name] = path
    return errors + _default_tools_errors(set(seen))


def _default_tools_errors(local: set[str]) -> list[CheckMessage]:
    """E022 DEFAULT_TOOLS not None or a list of names; E023 a name no tool can have.

    An MCP server's tools are not listed here (no server is started), so a
    name of one is accepted by its ``<server>__`` prefix.
    """
    names = raw_setting("DEFAULT_TOOLS")
    if names is None:
        return []
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        return wrong_type(
            "LLM_CONVERSATIONS['DEFAULT_TOOLS']",
            "None or a list of tool names",
            names,
            "llm_conversations.E022",
        )
    servers = raw_setting("MCP_SERVERS")
    prefixes = tuple(f"{s}{SEPARATOR}" for s in servers) if isinstance(servers, Mapping) else ()
    return [
        Error(
            f"LLM_CONVERSATIONS['DEFAULT_TOOLS'] names {name!r}, which is no tool.",
            hint="Name a tool of TOOLS, or <server>__<tool> of an MCP_SERVERS entry.",
            id="llm_conversations.E023",
        )
        for name in names
        if name not in local and not name.startswith(prefixes)
    ]


def check_mcp_servers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E030 MCP_SERVERS not a dict, E030-E034 each entry, E035 the SDK is missing.

    Nothing is started or connected: a server that is down is a run-time
    condition (its calls are answered with error results), not a setting error.
    """
    servers = raw_setting("MCP_SERVERS")
    if not isinstance(servers, Mapping):
        return wrong_type(
            "LLM_CONVERSATIONS['MCP_SERVERS']",
            "a dict of name -> server",
            servers,
            "llm_conversations.E030",
        )
    errors: list[CheckMessage] = []
    if servers and not mcp_installed():
        errors.append(Error(MISSING_SDK, id="llm_conversations.E035"))
    for name, entry in servers.items():
        problems = mcp_server_problems(entry, name, environment=True)
        errors.extend(as_check_message(p) for p in problems)
    return errors
