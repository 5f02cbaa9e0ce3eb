"""Tools of MCP servers (``LLM_CONVERSATIONS["MCP_SERVERS"]``) as ``Tool`` values.

A server's tools are listed once per ``MCP_TOOLS_TTL`` seconds and offered as
``<server>__<tool>``, with the server's (or the tool's own) approval,
client-side, repeatable and timeout rules. A call runs on the server; its
result, an ``isError`` result, or a server that is down or too slow, all
become a tool turn, an error result for the last three. A listing that fails
keeps the last list (its calls then fail one by one) and is retried after
:data:`RETRY_SECONDS`.

The ``mcp`` package is imported only when a server is listed or called.
"""

from __future__ import annotations

import logging
import threading
import time
from copy import deepcopy
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from django.core.signals import setting_changed

from llm_conversations.conf import conf
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.exceptions import ToolArgumentsError, ToolError
from llm_conversations.tools.definition import Tool
from llm_conversations.tools.mcp_config import McpServer, McpUnavailable, configured_servers
from llm_conversations.tools.results import tool_result_message

if TYPE_CHECKING:
    from llm_conversations.tools.mcp_client import McpAnswer, RemoteTool
    from llm_conversations.tools.tool_context import ToolContext

__all__ = ["RETRY_SECONDS", "McpTool", "clear_mcp_cache", "mcp_tools"]

logger = logging.getLogger("llm_conversations.tools.mcp")

# How soon a server whose listing failed is listed again (at most MCP_TOOLS_TTL).
RETRY_SECONDS = 30.0
# The loop's own deadline for a call comes this much after the server's
# TIMEOUT, so the exchange answers (and stops its server) first.
CLOSE_GRACE_SECONDS = 10.0


def _call(server: McpServer, name: str, /, **arguments: Any) -> McpAnswer:
    from llm_conversations.tools.mcp_client import call_tool

    return call_tool(server, name, arguments)


@dataclass(frozen=True)
class McpTool(Tool):
    """A tool of an MCP server; ``function`` calls it there (``None`` when client-side)."""

    server: McpServer | None = field(default=None, repr=False, compare=False, hash=False)
    remote_name: str = ""
    """The tool's name on its server (``name`` carries the server prefix)."""

    @property
    def offered_by_default(self) -> bool:
        """Only when its server's entry sets ``OFFER_BY_DEFAULT``."""
        return self.server is not None and self.server.offer_by_default

    def execute(self, call: ToolCall, tool_context: ToolContext | None = None) -> ChatMessage:
        """Validate the arguments, call the server and answer with its result.

        ``isError`` results and a server that fails or times out are error
        results; a client-side tool behaves as :meth:`Tool.execute` says. An
        MCP tool takes no ``tool_context``: the server sees only the arguments.
        """
        if self.function is None:
            return super().execute(call, tool_context)
        try:
            arguments = self.validate_call(call)
        except ToolArgumentsError as exc:
            return tool_result_message(call.id, exc.message, is_error=True)
        answer: McpAnswer = self.function(**arguments)
        return tool_result_message(call.id, answer.text, is_error=answer.is_error)


def remote_tool(server: McpServer, remote: RemoteTool) -> McpTool:
    """``remote`` as offered here; :class:`ToolError` when its name or schema cannot be."""
    rules = server.rules_for(remote.name)
    timeout = rules.timeout
    return McpTool(
        server.tool_name(remote.name),
        remote.description or remote.title or "",
        deepcopy(remote.input_schema),
        None if rules.client_side else partial(_call, server, remote.name),
        rules.requires_approval,
        timeout=None if timeout is None else timeout + CLOSE_GRACE_SECONDS,
        repeatable=rules.repeatable,
        server=server,
        remote_name=remote.name,
    )


@dataclass
class _Listing:
    """One server's last tool list; ``tools`` is ``None`` until a listing succeeded once."""

    tools: tuple[McpTool, ...] | None = None
    expires: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


_listings: dict[str, _Listing] = {}
_listings_lock = threading.Lock()


def mcp_tools() -> list[McpTool]:
    """The tools of every configured server, in settings order, then each server's order.

    Never raises for a server that is down: its last list is used (none before
    its first listing). Raises ``ImproperlyConfigured`` for bad settings.
    """
    tools: list[McpTool] = []
    for server in configured_servers():
        tools.extend(_tools_of(server))
    return tools


def _tools_of(server: McpServer) -> tuple[McpTool, ...]:
    with _listings_lock:
        listing = _listings.setdefault(server.name, _Listing())
    if listing.tools is not None and time.monotonic() < listing.expires:
        return listing.tools
    # One thread lists a server at a time; the others keep the last list meanwhile
    # and wait only for a first one.
    if not listing.lock.acquire(blocking=listing.tools is None):
        return listing.tools or ()
    try:
        if listing.tools is not None and time.monotonic() < listing.expires:
            return listing.tools  # listed by another thread while this one waited
        ttl = conf.MCP_TOOLS_TTL
        try:
            listing.tools = _listed(server)
        except McpUnavailable as exc:
            logger.warning(
                "Listing the tools of MCP server %s failed: %s", server.name, exc.message
            )
            listing.tools = listing.tools or ()
            listing.expires = time.monotonic() + min(ttl, RETRY_SECONDS)
        else:
            listing.expires = time.monotonic() + ttl
        return listing.tools
    finally:
        listing.lock.release()


def _listed(server: McpServer) -> tuple[McpTool, ...]:
    from llm_conversations.tools.mcp_client import list_tools

    tools = []
    for remote in list_tools(server):
        if server.include is not None and remote.name not in server.include:
            continue
        try:
            tools.append(remote_tool(server, remote))
        except ToolError as exc:
            logger.warning(
                "MCP server %s: tool %r is not offered: %s", server.name, remote.name, exc.message
            )
    return tuple(tools)


def clear_mcp_cache() -> None:
    """Forget every server's tool list; the next :func:`mcp_tools` lists them again."""
    with _listings_lock:
        _listings.clear()


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "LLM_CONVERSATIONS":
        clear_mcp_cache()


setting_changed.connect(_on_setting_changed, dispatch_uid="llm_conversations.tools.mcp.cache")
