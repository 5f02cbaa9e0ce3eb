"""Listing and calling the tools of an MCP server with the official ``mcp`` SDK, synchronously.

Imported only when ``MCP_SERVERS`` is set (the SDK is an optional extra).

The loop answers tool calls on pool threads and the API lists tools in request
threads, all synchronous; the SDK is async (anyio). Each exchange here (one
listing, or one call) runs in its own ``anyio.run`` with a fresh connection:
a stdio server is started for the exchange and stopped after it, an HTTP
session is opened and closed. That costs a process start or a handshake per
call, and buys what matters more here: no session, event loop or thread
outlives the call that needed it, so nothing leaks between threads, forked
workers or a server that crashed meanwhile, and a timeout is one cancel scope
around the whole exchange. The SDK stops a stdio server on the way out even
when the exchange is cancelled (its shutdown is shielded): stdin closed, then
SIGTERM and SIGKILL to its process group.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client, Implementation, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from mcp.types import Tool as RemoteTool

from llm_conversations import __version__
from llm_conversations.tools.mcp_config import McpServer, McpUnavailable
from llm_conversations.tools.results import exception_summary

__all__ = ["McpAnswer", "RemoteTool", "call_tool", "list_tools"]

_T = TypeVar("_T")

# A server that pages its tool list forever cannot hang a listing.
_MAX_PAGES = 100
# HTTP timeouts under the exchange's own deadline: the SDK's defaults.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
_CLIENT_INFO = Implementation(name="llm_conversations", version=__version__)


@dataclass(frozen=True)
class McpAnswer:
    """A call's outcome as tool-turn text; ``is_error`` for ``isError`` results and failures."""

    text: str
    is_error: bool = False


def list_tools(server: McpServer) -> list[RemoteTool]:
    """Every tool the server lists; :class:`McpUnavailable` when it cannot be listed."""

    async def listing(client: Client) -> list[RemoteTool]:
        tools: list[RemoteTool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    return _exchange(server, listing, server.rules.timeout)


def call_tool(server: McpServer, name: str, arguments: dict[str, Any]) -> McpAnswer:
    """Call ``name`` on the server within the tool's timeout; every failure is an error
    answer, never an exception."""

    async def calling(client: Client) -> CallToolResult:
        return await client.call_tool(name, arguments)

    try:
        result = _exchange(server, calling, server.rules_for(name).timeout)
    except McpUnavailable as exc:
        return McpAnswer(exc.message, is_error=True)
    return McpAnswer(result_text(result), is_error=result.is_error)


def result_text(result: CallToolResult) -> str:
    """A result as one text: its content blocks, one a line.

    With structured content the protocol makes the text blocks its serialization
    "for backwards compatibility" (however a server writes it: ``42`` for
    ``{"result": 42}``), so the structured content is kept, as JSON, in their
    place: the value once, never twice. Other blocks (images, resources) stay.
    """
    structured = result.structured_content
    if structured is None:
        return "\n".join(_block_text(block) for block in result.content)
    parts = [_block_text(block) for block in result.content if not isinstance(block, TextContent)]
    return "\n".join([json.dumps(structured, ensure_ascii=False), *parts])


def _block_text(block: ContentBlock) -> str:
    # Models get text; binary content is described, not inlined as base64.
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type}: {block.mime_type}, {len(block.data)} base64 characters]"
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.uri} ({block.name})]"
    if isinstance(block, EmbeddedResource):
        if isinstance(block.resource, TextResourceContents):
            return block.resource.text
        return f"[resource: {block.resource.uri} ({block.resource.mime_type or 'binary'})]"
    return f"[{block.type} content]"


def _exchange(
    server: McpServer, work: Callable[[Client], Awaitable[_T]], timeout: float | None
) -> _T:
    """Connect, run ``work`` and disconnect within ``timeout`` seconds, in a new event loop."""

    # The SDK turns an HTTP error status into a generic protocol error; the
    # status is what tells an operator that a token was refused.
    statuses: list[int] = []

    async def run() -> _T:
        with anyio.fail_after(timeout):
            async with _connected(server, statuses) as client:
                return await work(client)

    try:
        return anyio.run(run)
    except McpUnavailable:
        raise
    except Exception as exc:
        text = _describe(server, exc, timeout)
        if statuses and isinstance(_leaf(exc), MCPError):
            text = f"{text} (HTTP status {statuses[-1]})"
        raise McpUnavailable(_redacted(text, server)) from exc


@contextlib.asynccontextmanager
async def _connected(server: McpServer, statuses: list[int]) -> AsyncIterator[Client]:
    if server.command is not None:
        parameters = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=server.values(server.env, "ENV"),
            cwd=server.cwd,
        )
        async with Client(parameters, client_info=_CLIENT_INFO) as client:
            yield client
        return
    assert server.url is not None  # mcp_server_problems: COMMAND or URL
    headers = server.values(server.headers, "HEADERS")

    async def note_status(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            statuses.append(response.status_code)

    hooks = {"response": [note_status]}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=_HTTP_TIMEOUT, event_hooks=hooks) as http,
        Client(
            streamable_http_client(server.url, http_client=http), client_info=_CLIENT_INFO
        ) as client,
    ):
        yield client


def _leaf(error: BaseException) -> BaseException:
    """The first real error inside the exception groups of anyio's task groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _describe(server: McpServer, error: BaseException, timeout: float | None) -> str:
    who = f"The MCP server {server.name!r}"
    error = _leaf(error)
    if isinstance(error, McpUnavailable):
        return error.message
    if isinstance(error, TimeoutError) and timeout is not None:
        return f"{who} did not answer within {timeout:g} seconds."
    if isinstance(error, MCPError):
        return f"{who} answered with an error: {error.message}"
    if isinstance(error, OSError) and server.command is not None:
        return f"{who} could not be started: {exception_summary(error)}"
    if isinstance(error, OSError | httpx2.TransportError):
        return f"{who} is not reachable: {exception_summary(error)}"
    return f"{who} failed: {exception_summary(error)}"


def _redacted(text: str, server: McpServer) -> str:
    """``text`` without the values of the server's ``ENV`` and ``HEADERS``."""
    for secret in server.secrets():
        text = text.replace(secret, "[redacted]")
    return text
