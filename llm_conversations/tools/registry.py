"""The tool registry and the default one built from ``LLM_CONVERSATIONS["TOOLS"]``."""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from llm_conversations.conf import conf, raw_setting
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import ToolError
from llm_conversations.tools.definition import Tool
from llm_conversations.tools.results import tool_result_message
from llm_conversations.tools.tool_context import ToolContext

logger = logging.getLogger("llm_conversations.tools")


class ToolRegistry:
    """Tools by name, in registration order."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.register(item)

    def register(self, item: Tool | Callable[..., Any], *, replace: bool = False) -> Tool:
        """Add a tool (a plain function is wrapped); a taken name raises unless ``replace``."""
        new = item if isinstance(item, Tool) else Tool.from_function(item)
        if new.name in self._tools and not replace:
            raise ToolError("duplicate_tool", f"a tool named {new.name!r} is already registered.")
        self._tools[new.name] = new
        return new

    def get(self, name: str) -> Tool:
        """The tool called ``name``; :class:`ToolError` ``unknown_tool`` when absent."""
        try:
            return self._tools[name]
        except KeyError:
            raise ToolError("unknown_tool", self._unknown_message([name])) from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names()!r})"

    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        """The specs to offer a provider."""
        return [item.spec for item in self._tools.values()]

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A registry of only ``names`` (in that order); unknown names raise ``unknown_tool``."""
        wanted = list(dict.fromkeys(names))
        missing = [name for name in wanted if name not in self._tools]
        if missing:
            raise ToolError("unknown_tool", self._unknown_message(missing))
        return ToolRegistry(self._tools[name] for name in wanted)

    def execute(self, call: ToolCall, tool_context: ToolContext | None = None) -> ChatMessage:
        """Answer ``call`` (``tool_context`` for a tool that takes one); an unknown name is an
        error result naming the available tools."""
        found = self._tools.get(call.name)
        if found is None:
            return tool_result_message(call.id, self._unknown_message([call.name]), is_error=True)
        return found.execute(call, tool_context)

    def _unknown_message(self, names: list[str]) -> str:
        label = "Unknown tool" if len(names) == 1 else "Unknown tools"
        available = ", ".join(self._tools) or "none"
        return f"{label}: {', '.join(names)}. Available tools: {available}."


def load_tool(path: str) -> Tool:
    """Import ``path``: a ``Tool`` is used as is, a plain function is wrapped.

    Raises :class:`ToolError` (``tool_import_error``, ``not_a_tool`` or a
    declaration code) when the entry cannot become a tool.
    """
    try:
        target = import_string(path)
    except ImportError as exc:
        raise ToolError("tool_import_error", f"cannot import {path!r}: {exc}") from exc
    if isinstance(target, Tool):
        return target
    if callable(target) and not inspect.isclass(target):
        return Tool.from_function(target)
    raise ToolError(
        "not_a_tool", f"{path!r} is a {type(target).__name__}, not a Tool or a function."
    )


_default: ToolRegistry | None = None
_default_lock = threading.Lock()
# The registry with the MCP servers' tools, and the ids of those tools it was built from.
_combined: tuple[tuple[int, ...], ToolRegistry] | None = None


def default_registry() -> ToolRegistry:
    """The tools of ``LLM_CONVERSATIONS["TOOLS"]``, then those of ``MCP_SERVERS``.

    The ``TOOLS`` are built once and cached; the servers' tools come from
    their cached lists (:func:`~llm_conversations.tools.mcp.mcp_tools`). The
    cache is dropped whenever the setting changes (``override_settings``).
    Raises ``ImproperlyConfigured`` for an entry that cannot be loaded.
    """
    global _default, _combined
    with _default_lock:
        if _default is None:
            try:
                _default = ToolRegistry(load_tool(path) for path in conf.TOOLS)
            except ToolError as exc:
                raise ImproperlyConfigured(f"LLM_CONVERSATIONS['TOOLS']: {exc.message}") from exc
        local = _default
    if not raw_setting("MCP_SERVERS"):
        return local
    from llm_conversations.tools.mcp import mcp_tools

    remote = mcp_tools()
    key = tuple(map(id, remote))
    with _default_lock:
        if _combined is None or _combined[0] != key or _default is not local:
            _combined = key, _with_remote(local, remote)
        return _combined[1]


def offered_by_default(registry: ToolRegistry) -> list[str]:
    """The names of ``registry`` a run offers when it names no tools, in order.

    ``DEFAULT_TOOLS`` ``None``: every tool whose ``offered_by_default`` holds
    (all of ``TOOLS``, an MCP server's only with ``OFFER_BY_DEFAULT``); a list:
    the ones it names. A named tool the registry lacks (an MCP server that did
    not answer its listing) is left out, so a run still starts.
    """
    chosen = conf.DEFAULT_TOOLS
    if chosen is None:
        return [item.name for item in registry if item.offered_by_default]
    return [name for name in dict.fromkeys(chosen) if name in registry]


def _with_remote(local: ToolRegistry, remote: Iterable[Tool]) -> ToolRegistry:
    combined = ToolRegistry(local)
    for item in remote:
        if item.name in combined:
            logger.warning("The MCP tool %s is not offered: a tool has that name.", item.name)
        else:
            combined.register(item)
    return combined


def _reset_default_registry(*, setting: str, **kwargs: Any) -> None:
    global _default, _combined
    if setting == "LLM_CONVERSATIONS":
        with _default_lock:
            _default = _combined = None


setting_changed.connect(_reset_default_registry, dispatch_uid="llm_conversations.tools.reset")
