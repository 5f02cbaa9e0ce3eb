"""MCP tools in the registry against the reference server: listing, results, failures, caching."""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from llm_conversations.core.messages import ToolCall
from llm_conversations.exceptions import ToolError
from llm_conversations.tools import default_registry
from llm_conversations.tools import mcp as mcp_module
from llm_conversations.tools.mcp import McpTool
from llm_conversations.tools.mcp_config import McpServer, configured_servers
from tests.mcp.conftest import everything_over_http, mcp_settings, sdk_module, stdio_entry
from tests.support.http_server import serving, stop_event

# Modules that need the SDK: without it this module skips (under CI: fails).
client = sdk_module("llm_conversations.tools.mcp_client")
types = sdk_module("mcp.types")

ECHO_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"message": {"type": "string", "description": "Message to echo"}},
    "required": ["message"],
}


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall("c1", name, arguments)


def only_server() -> McpServer:
    [server] = configured_servers()
    return server


def test_a_stdio_server_s_tools_join_the_registry_under_its_prefix(node: str) -> None:
    with mcp_settings({"everything": stdio_entry(node)}):
        registry = default_registry()
        names = registry.names()
        echo = registry.get("everything__echo")
    assert "everything__get-sum" in names
    assert "everything__trigger-long-running-operation" in names
    assert all(name.startswith("everything__") for name in names)
    assert isinstance(echo, McpTool)
    assert (echo.description, echo.parameters, echo.remote_name) == (
        "Echoes back the input string",
        ECHO_SCHEMA,
        "echo",
    )
    assert (echo.requires_approval, echo.is_client_side, echo.repeatable) == (False, False, True)
    # The loop's own deadline leaves the exchange time to answer and stop its server.
    assert echo.timeout == 120.0 + mcp_module.CLOSE_GRACE_SECONDS


def test_python_tools_come_first_and_include_limits_a_server(node: str) -> None:
    entry = stdio_entry(node, INCLUDE=["echo", "get-sum"])
    with mcp_settings({"everything": entry}, TOOLS=["tests.support.loop_tools.get_time"]):
        assert default_registry().names() == [
            "get_time",
            "everything__echo",
            "everything__get-sum",
        ]


def test_results_text_structured_binary_and_is_error(node: str) -> None:
    with mcp_settings({"everything": stdio_entry(node)}):
        registry = default_registry()
        echo = registry.execute(call("everything__echo", message="héllo"))
        weather = registry.execute(call("everything__get-structured-content", location="Chicago"))
        image = registry.execute(call("everything__get-tiny-image"))
        failed = registry.execute(call("everything__gzip-file-as-resource", data="ftp://x/y"))
    assert (echo.content, echo.is_error, echo.tool_call_id) == ("Echo: héllo", False, "c1")
    # The structured value, once: its text block is not stored beside it.
    assert set(json.loads(weather.content)) == {"temperature", "conditions", "humidity"}
    assert not weather.is_error
    assert image.content.splitlines() == [
        "Here's the image you requested:",
        "[image: image/png, 5380 base64 characters]",
        "The image above is the MCP logo.",
    ]
    assert failed.is_error
    assert failed.content.startswith("Error processing file ftp://x/y: Unsupported URL protocol")


def test_bad_arguments_are_refused_before_the_server_is_started(node: str) -> None:
    with mcp_settings({"everything": stdio_entry(node)}):
        registry = default_registry()
        started = time.monotonic()
        result = registry.execute(call("everything__get-sum", a="one", b=2))
    assert result.is_error
    assert (
        result.content
        == "Invalid arguments for everything__get-sum: a: 'one' is not of type 'number'"
    )
    assert time.monotonic() - started < 0.2  # no process was started for it


def test_a_call_that_never_answers_is_an_error_result_and_its_server_is_stopped(
    node: str,
) -> None:
    threads = set(threading.enumerate())
    slow = {"trigger-long-running-operation": {"TIMEOUT": 1}}
    with mcp_settings({"everything": stdio_entry(node, TOOLS=slow)}):
        registry = default_registry()
        started = time.monotonic()
        result = registry.execute(
            call("everything__trigger-long-running-operation", duration=60, steps=1)
        )
        took = time.monotonic() - started
    assert result.is_error
    assert result.content == "The MCP server 'everything' did not answer within 1 seconds."
    assert took < 15  # starting the server, the deadline, the SDK's bounded shutdown
    assert set(threading.enumerate()) <= threads  # the exchange kept no thread
    # The autouse fixture checks that the server process is gone.


def test_a_server_that_cannot_start_lists_nothing_and_is_retried(
    node: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_module, "RETRY_SECONDS", 1.0)
    servers = {
        "everything": stdio_entry(node, INCLUDE=["echo"]),
        "missing": {"COMMAND": "/nonexistent/mcp-server"},
    }
    with mcp_settings(servers):
        assert default_registry().names() == ["everything__echo"]
        assert (
            "Listing the tools of MCP server missing failed: The MCP server 'missing' could not be started: FileNotFoundError"
            in caplog.text
        )
        caplog.clear()
        default_registry()
        assert caplog.text == ""  # not listed again before the retry interval
        time.sleep(1.05)
        default_registry()
        assert "MCP server missing failed" in caplog.text


def test_tool_lists_are_cached_for_the_ttl(node: str) -> None:
    with mcp_settings({"everything": stdio_entry(node, INCLUDE=["echo"])}, MCP_TOOLS_TTL=1):
        first = default_registry()
        started = time.monotonic()
        assert default_registry() is first  # no listing: no process started
        assert time.monotonic() - started < 0.05
        time.sleep(1.05)
        second = default_registry()
    assert second is not first
    assert second.names() == first.names() == ["everything__echo"]
    assert second.get("everything__echo") is not first.get("everything__echo")


def test_a_server_that_went_down_keeps_its_last_list_and_each_call_fails(
    node: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_module, "RETRY_SECONDS", 0.01)
    with everything_over_http(node) as (url, server):
        entry = {"URL": url, "INCLUDE": ["echo"], "TIMEOUT": 5}
        with mcp_settings({"everything": entry}):
            registry = default_registry()
            assert registry.execute(call("everything__echo", message="up")).content == "Echo: up"
            server.terminate()
            server.wait(timeout=10)
            result = registry.execute(call("everything__echo", message="down"))
            time.sleep(0.02)
            assert default_registry().names() == ["everything__echo"]  # the last list
    assert result.is_error
    assert result.content.startswith("The MCP server 'everything' is not reachable: ConnectError")


# Streamable HTTP ---------------------------------------------------------------


def test_over_streamable_http(everything_url: str) -> None:
    entry = {"URL": everything_url, "INCLUDE": ["echo", "get-structured-content"]}
    with mcp_settings({"web": entry}):
        registry = default_registry()
        echo = registry.execute(call("web__echo", message="over http"))
        weather = registry.execute(call("web__get-structured-content", location="New York"))
    assert registry.names() == ["web__echo", "web__get-structured-content"]
    assert (echo.content, echo.is_error) == ("Echo: over http", False)
    assert set(json.loads(weather.content)) == {"temperature", "conditions", "humidity"}


def test_headers_are_read_from_the_environment_and_never_shown(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str | None] = []

    def refuse(handler: BaseHTTPRequestHandler) -> None:
        seen.append(handler.headers.get("Authorization"))
        handler.send_response(401)
        handler.send_header("Content-Type", "text/plain")
        handler.end_headers()
        handler.wfile.write(b"bad token Bearer sk-test-123")

    monkeypatch.setenv("DOCS_MCP_AUTHORIZATION", "Bearer sk-test-123")
    with serving(refuse) as http:
        entry = {"URL": f"{http.root}/mcp", "HEADERS": {"Authorization": "DOCS_MCP_AUTHORIZATION"}}
        with mcp_settings({"docs": entry}):
            assert default_registry().names() == []
            answer = client.call_tool(only_server(), "search", {"q": "x"})
    assert seen
    assert set(seen) == {"Bearer sk-test-123"}
    assert answer.is_error
    assert answer.text == (
        "The MCP server 'docs' answered with an error: Server returned an error response "
        "(HTTP status 401)"
    )
    assert "sk-test-123" not in caplog.text


def test_an_http_server_that_never_answers_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(handler: BaseHTTPRequestHandler) -> None:
        stop_event(handler).wait(30)

    threads = set(threading.enumerate())
    with serving(hang) as http, mcp_settings({"slow": {"URL": f"{http.root}/mcp", "TIMEOUT": 0.5}}):
        started = time.monotonic()
        assert default_registry().names() == []
        answer = client.call_tool(only_server(), "search", {})
        took = time.monotonic() - started
    assert answer == client.McpAnswer(
        "The MCP server 'slow' did not answer within 0.5 seconds.", True
    )
    assert took < 3
    time.sleep(0.1)
    assert set(threading.enumerate()) <= threads


def test_a_protocol_error_is_an_error_answer() -> None:
    def error(handler: BaseHTTPRequestHandler) -> None:
        request = json.loads(handler.body)
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": request.get("id"),
                "error": {"code": -32603, "message": "boom"},
            }
        ).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    with serving(error) as http, mcp_settings({"broken": {"URL": f"{http.root}/mcp"}}):
        answer = client.call_tool(only_server(), "x", {})
    assert answer.is_error
    assert answer.text == "The MCP server 'broken' answered with an error: boom"


def test_env_values_reach_a_stdio_server(node: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMCONV_TEST_TOKEN", "tok-42")
    entry = stdio_entry(node, ENV={"UPSTREAM_TOKEN": "LLMCONV_TEST_TOKEN"}, INCLUDE=["get-env"])
    with mcp_settings({"everything": entry}):
        result = default_registry().execute(call("everything__get-env"))
    environment = json.loads(result.content)
    assert environment["UPSTREAM_TOKEN"] == "tok-42"
    # Only the SDK's safe defaults and ENV: not this process's whole environment.
    assert "LLMCONV_TEST_TOKEN" not in environment
    assert "DJANGO_SETTINGS_MODULE" not in environment


def test_logs_of_a_failed_listing_are_warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "llm_conversations.tools.mcp")
    with mcp_settings({"down": {"URL": "http://127.0.0.1:9/mcp", "TIMEOUT": 5}}):
        assert default_registry().names() == []
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "The MCP server 'down' is not reachable" in record.getMessage()


# Without a server: rules and result text --------------------------------------


def test_rules_per_server_and_per_tool_become_the_tool_s() -> None:
    rules = {"search": {"CLIENT_SIDE": True}, "pay": {"REPEATABLE": False, "TIMEOUT": 5}}
    servers = {"s": {"URL": "http://h/mcp", "REQUIRES_APPROVAL": True, "TOOLS": rules}}
    with mcp_settings(servers, TOOL_TIMEOUT=None):
        server = only_server()
    schema = {"type": "object", "properties": {}}
    search, pay, other = (
        mcp_module.remote_tool(server, types.Tool(name=name, input_schema=schema))
        for name in ("search", "pay", "other")
    )
    assert (search.is_client_side, search.requires_approval, search.timeout) == (True, True, None)
    assert (pay.is_client_side, pay.repeatable, pay.timeout) == (False, False, 15.0)
    assert (other.requires_approval, other.repeatable, other.timeout) == (True, True, None)
    assert (other.name, other.remote_name, other.server) == ("s__other", "other", server)


def test_a_tool_whose_name_or_schema_cannot_be_offered_is_skipped() -> None:
    server = McpServer("s" * 32, url="http://h/mcp")
    with pytest.raises(ToolError, match="tool name must match"):
        mcp_module.remote_tool(server, types.Tool(name="x" * 31, input_schema={"type": "object"}))
    with pytest.raises(ToolError, match="JSON Schema"):
        mcp_module.remote_tool(server, types.Tool(name="t", input_schema={"type": "string"}))


def test_result_text_of_each_content_kind() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(text="two blocks"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///a.txt", text="embedded text")
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(
                    uri="file:///a.bin", blob="AAAA", mime_type=None
                )
            ),
            types.ResourceLink(uri="demo://r/1", name="Resource 1"),
            types.AudioContent(data="UklGRg==", mime_type="audio/wav"),
        ],
        structured_content={"n": 1},
    )
    assert client.result_text(result).splitlines() == [
        '{"n": 1}',  # in place of the text block, its serialization
        "embedded text",
        "[resource: file:///a.bin (binary)]",
        "[resource link: demo://r/1 (Resource 1)]",
        "[audio: audio/wav, 8 base64 characters]",
    ]
    without = types.CallToolResult(content=result.content)
    assert client.result_text(without).splitlines()[0] == "two blocks"
    holds = types.CallToolResult(
        content=[types.TextContent(text='{"n":1}')], structured_content={"n": 1}
    )
    assert client.result_text(holds) == '{"n": 1}'
    # A server's own serialization of a wrapped value is not stored beside it.
    wrapped = types.CallToolResult(
        content=[types.TextContent(text="42")], structured_content={"result": 42}
    )
    assert client.result_text(wrapped) == '{"result": 42}'
    assert client.result_text(types.CallToolResult(content=[], structured_content=["a"])) == '["a"]'
    assert client.result_text(types.CallToolResult(content=[])) == ""
