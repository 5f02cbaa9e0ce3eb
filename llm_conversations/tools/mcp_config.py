"""``LLM_CONVERSATIONS["MCP_SERVERS"]``: the rules of one entry and the parsed servers.

Nothing here imports the ``mcp`` package, so the settings can be checked (and
the app used) where it is not installed. :func:`mcp_server_problems` holds the
rules of one entry; :func:`configured_servers` refuses an entry with the first
error and the system check (``llm_conversations.checks``) reports all of them,
so both say the same.

Values that may be secrets (the environment of a stdio server, the headers of
an HTTP one) are never written in settings: ``ENV`` and ``HEADERS`` map each
name to the name of an environment variable of this process, read when a
connection is made.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.util import find_spec
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from llm_conversations.conf import conf
from llm_conversations.core.settings_rules import (
    EntryProblem,
    is_finite_positive_number,
    unknown_key_problems,
)
from llm_conversations.exceptions import LLMConversationsError

__all__ = [
    "ENTRY_KEYS",
    "TOOL_KEYS",
    "McpServer",
    "McpUnavailable",
    "ToolRules",
    "configured_servers",
    "mcp_installed",
    "mcp_server_problems",
    "missing_variables",
]

# A server's name prefixes its tools' names (``everything__echo``): it must fit
# the tool-name rule of tool_specs.py and leave room for the tool's own name.
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}\Z")
SEPARATOR = "__"
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")

# Options that apply to every tool of a server and may be set again per tool.
TOOL_KEYS = frozenset({"REQUIRES_APPROVAL", "CLIENT_SIDE", "REPEATABLE", "TIMEOUT"})
ENTRY_KEYS = TOOL_KEYS | {
    "COMMAND",
    "ARGS",
    "ENV",
    "CWD",
    "URL",
    "HEADERS",
    "INCLUDE",
    "TOOLS",
    "OFFER_BY_DEFAULT",
}
_FLAGS = ("REQUIRES_APPROVAL", "CLIENT_SIDE", "REPEATABLE")

MISSING_SDK = (
    "LLM_CONVERSATIONS['MCP_SERVERS'] is set but the 'mcp' package is not installed; "
    "install it with: pip install 'llm-conversations[mcp]'"
)


class McpUnavailable(LLMConversationsError):
    """A server could not be reached, did not answer in time or broke the protocol.

    ``message`` is written for the model and the operator; it never holds a
    header or environment value.
    """

    def __init__(self, message: str) -> None:
        super().__init__("mcp_unavailable", message)


@dataclass(frozen=True)
class ToolRules:
    """How the tools of a server are offered and run: the same options as ``@tool``."""

    requires_approval: bool = False
    client_side: bool = False
    repeatable: bool = True
    timeout: float | None = None
    """Seconds one exchange (connection included) may take; ``None`` for no limit
    (``TIMEOUT`` defaults to the ``TOOL_TIMEOUT`` setting, which may be ``None``)."""


@dataclass(frozen=True)
class McpServer:
    """One parsed ``MCP_SERVERS`` entry: a stdio command or a Streamable HTTP URL."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    """Variable of the server process -> variable of this process holding its value."""
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """Header -> variable of this process holding its value."""
    include: frozenset[str] | None = None
    offer_by_default: bool = False
    """Whether a run that names no tools offers this server's tools while
    ``DEFAULT_TOOLS`` is ``None`` (``OFFER_BY_DEFAULT``)."""
    rules: ToolRules = ToolRules()
    tool_rules: Mapping[str, ToolRules] = field(default_factory=dict)

    def rules_for(self, tool: str) -> ToolRules:
        """The rules of one of the server's tools (its own ``TOOLS`` entry, else the server's)."""
        return self.tool_rules.get(tool, self.rules)

    def tool_name(self, tool: str) -> str:
        """The name the model sees: ``<server>__<tool>``."""
        return f"{self.name}{SEPARATOR}{tool}"

    def values(self, names: Mapping[str, str], what: str) -> dict[str, str]:
        """``names`` with each variable's value; :class:`McpUnavailable` when one is unset."""
        missing = missing_variables(names)
        if missing:
            raise McpUnavailable(
                f"The MCP server {self.name!r} cannot be used: the environment variable "
                f"{missing[0]} ({what}) is not set."
            )
        return {key: os.environ[variable] for key, variable in names.items()}

    def secrets(self) -> list[str]:
        """The values of this server's ``ENV`` and ``HEADERS``, to keep out of messages."""
        names = [*self.env.values(), *self.headers.values()]
        return [os.environ[n] for n in names if os.environ.get(n)]


def mcp_installed() -> bool:
    """Whether the ``mcp`` package can be imported."""
    try:
        return find_spec("mcp") is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules
        return False


def missing_variables(names: Mapping[str, str]) -> list[str]:
    """The environment variables among ``names.values()`` that are not set."""
    return [v for v in names.values() if isinstance(v, str) and v not in os.environ]


def _is_names(value: object) -> bool:
    # A value that is no variable name (a token pasted in) is refused without being echoed.
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and k and isinstance(v, str) and VARIABLE_NAME.match(v)
        for k, v in value.items()
    )


def _is_strings(value: object) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)


def _option_problems(options: Mapping[Any, Any], where: str) -> list[EntryProblem]:
    problems = []
    for key in _FLAGS:
        if key in options and not isinstance(options[key], bool):
            problems.append(
                EntryProblem(
                    "llm_conversations.E033",
                    f"{where}[{key!r}] must be True or False; got {options[key]!r}.",
                )
            )
    if "TIMEOUT" in options and not is_finite_positive_number(options["TIMEOUT"]):
        problems.append(
            EntryProblem(
                "llm_conversations.E033",
                f"{where}['TIMEOUT'] must be a positive number of seconds; "
                f"got {options['TIMEOUT']!r}.",
            )
        )
    return problems


def _transport_problems(entry: Mapping[Any, Any], where: str) -> list[EntryProblem]:
    command, url = entry.get("COMMAND"), entry.get("URL")
    if (command is None) == (url is None):
        return [
            EntryProblem(
                "llm_conversations.E031",
                f"{where} needs either COMMAND (a stdio server) or URL (Streamable HTTP), "
                "not both.",
            )
        ]
    problems: list[str] = []
    if command is not None:
        if not isinstance(command, str) or not command:
            problems.append("COMMAND must be a non-empty string")
        if not _is_strings(entry.get("ARGS", [])):
            problems.append("ARGS must be a list of strings")
        if not isinstance(entry.get("CWD", ""), str):
            problems.append("CWD must be a string")
        problems += [f"{key} is for URL servers" for key in ("HEADERS",) if key in entry]
    else:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append("URL must be an http:// or https:// URL")
        elif parts.username or parts.password:
            problems.append("URL must not hold credentials; send them in HEADERS")
        problems += [
            f"{key} is for COMMAND servers" for key in ("ARGS", "ENV", "CWD") if key in entry
        ]
    return [EntryProblem("llm_conversations.E031", f"{where}: {text}.") for text in problems]


def _tools_problems(entry: Mapping[Any, Any], where: str) -> list[EntryProblem]:
    problems = []
    if "INCLUDE" in entry and not _is_strings(entry["INCLUDE"]):
        problems.append(
            EntryProblem(
                "llm_conversations.E033", f"{where}['INCLUDE'] must be a list of tool names."
            )
        )
    tools = entry.get("TOOLS", {})
    if not isinstance(tools, Mapping) or not all(isinstance(v, Mapping) for v in tools.values()):
        problems.append(
            EntryProblem(
                "llm_conversations.E033",
                f"{where}['TOOLS'] must be a dict of tool name -> options.",
                hint=f"Options: {', '.join(sorted(TOOL_KEYS))}.",
            )
        )
        return problems
    for tool, options in tools.items():
        inner = f"{where}['TOOLS'][{tool!r}]"
        problems += unknown_key_problems(options, TOOL_KEYS, inner, "llm_conversations.E032")
        problems += _option_problems(options, inner)
    return problems


def mcp_server_problems(
    entry: object, name: object, *, environment: bool = False
) -> list[EntryProblem]:
    """Every problem of one ``MCP_SERVERS`` entry, in a stable order.

    Ids: E030 a bad name or an entry that is not a dict, E031 the transport
    (COMMAND with ARGS/CWD/ENV, or URL with HEADERS), E032 an unknown key, E033
    a bad option (TIMEOUT, the flags, OFFER_BY_DEFAULT, INCLUDE, TOOLS), E034 ENV or HEADERS not
    a dict of names. With ``environment`` (the system check), E034 also reports
    a named environment variable that is not set.
    """
    where = f"LLM_CONVERSATIONS['MCP_SERVERS'][{name!r}]"
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        return [
            EntryProblem(
                "llm_conversations.E030",
                f"{where}: a server name must match [A-Za-z0-9_-]{{1,32}}.",
                hint="It prefixes the names of the server's tools: <server>__<tool>.",
            )
        ]
    if not isinstance(entry, Mapping):
        return [EntryProblem("llm_conversations.E030", f"{where} must be a dict.")]
    problems = _transport_problems(entry, where)
    problems += unknown_key_problems(entry, ENTRY_KEYS, where, "llm_conversations.E032")
    problems += _option_problems(entry, where) + _tools_problems(entry, where)
    if not isinstance(entry.get("OFFER_BY_DEFAULT", False), bool):
        problems.append(
            EntryProblem(
                "llm_conversations.E033",
                f"{where}['OFFER_BY_DEFAULT'] must be True or False; "
                f"got {entry['OFFER_BY_DEFAULT']!r}.",
            )
        )
    for key in ("ENV", "HEADERS"):
        names = entry.get(key, {})
        if not _is_names(names):
            problems.append(
                EntryProblem(
                    "llm_conversations.E034",
                    f"{where}[{key!r}] must map names to environment variable names.",
                    hint="Values are read from this process's environment, never written here.",
                )
            )
        elif environment:
            problems += [
                EntryProblem(
                    "llm_conversations.E034",
                    f"{where}[{key!r}] names the environment variable {variable}, "
                    "which is not set.",
                )
                for variable in missing_variables(names)
            ]
    return problems


def _rules(options: Mapping[str, Any], base: ToolRules) -> ToolRules:
    return ToolRules(
        requires_approval=options.get("REQUIRES_APPROVAL", base.requires_approval),
        client_side=options.get("CLIENT_SIDE", base.client_side),
        repeatable=options.get("REPEATABLE", base.repeatable),
        timeout=options.get("TIMEOUT", base.timeout),
    )


def _server(name: str, entry: Mapping[str, Any]) -> McpServer:
    rules = _rules(entry, ToolRules(timeout=conf.TOOL_TIMEOUT))
    include = entry.get("INCLUDE")
    return McpServer(
        name=name,
        command=entry.get("COMMAND"),
        args=tuple(entry.get("ARGS", ())),
        cwd=entry.get("CWD"),
        env=dict(entry.get("ENV", {})),
        url=entry.get("URL"),
        headers=dict(entry.get("HEADERS", {})),
        include=None if include is None else frozenset(include),
        offer_by_default=entry.get("OFFER_BY_DEFAULT", False),
        rules=rules,
        tool_rules={tool: _rules(o, rules) for tool, o in entry.get("TOOLS", {}).items()},
    )


def configured_servers() -> list[McpServer]:
    """The servers of ``MCP_SERVERS``, in settings order.

    Raises ``ImproperlyConfigured`` with the first error the system check
    reports, or when servers are set and the ``mcp`` package is missing.
    """
    try:
        entries = conf.MCP_SERVERS
    except (TypeError, ValueError):
        raise ImproperlyConfigured("LLM_CONVERSATIONS['MCP_SERVERS'] must be a dict.") from None
    if entries and not mcp_installed():
        raise ImproperlyConfigured(MISSING_SDK)
    for name, entry in entries.items():
        for problem in mcp_server_problems(entry, name):
            raise ImproperlyConfigured(problem.message)
    return [_server(name, entry) for name, entry in entries.items()]
