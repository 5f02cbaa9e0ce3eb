"""A fake Responses API server on 127.0.0.1: answers ``POST /v1/responses`` from a
script of response bodies, in order, and keeps every request body it was sent.

The bodies are whole Responses API response objects (as OpenAI sends them, or
as a recording holds them), served as JSON; a stream was not asked for. The
framework tests point a real client (the OpenAI SDK of the Agents SDK, the app's
own ``openai_responses`` adapter) at :attr:`ResponsesServer.base_url`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.http_server import LocalHTTPServer

__all__ = ["ResponsesServer", "function_call", "message", "reasoning", "response", "serving"]


class ResponsesServer:
    """Serves ``replies`` in order; ``requests`` holds what each request sent."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.server = LocalHTTPServer(self._respond)

    @property
    def base_url(self) -> str:
        return f"{self.server.root}/v1"

    def _respond(self, handler: BaseHTTPRequestHandler) -> None:
        body = json.loads(getattr(handler, "body", b"") or b"{}")
        if handler.path.rstrip("/") != "/v1/responses" or not self.replies:
            payload = json.dumps({"error": {"message": f"nothing for {handler.path}"}}).encode()
            status = 404
        else:
            self.requests.append(body)
            payload = json.dumps(self.replies.pop(0)).encode()
            status = 200
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def close(self) -> None:
        self.server.close()


@contextmanager
def serving(replies: list[dict[str, Any]]) -> Iterator[ResponsesServer]:
    """A :class:`ResponsesServer` for the ``with`` block."""
    fake = ResponsesServer(replies)
    try:
        yield fake
    finally:
        fake.close()


def message(text: str, item_id: str = "msg_1") -> dict[str, Any]:
    """An assistant ``message`` output item."""
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call(call_id: str, name: str, arguments: str, item_id: str = "fc_1") -> dict[str, Any]:
    """A ``function_call`` output item."""
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def reasoning(summary: str, encrypted: str, item_id: str = "rs_1") -> dict[str, Any]:
    """A ``reasoning`` output item with its summary and encrypted content."""
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": encrypted,
    }


def response(*output: dict[str, Any], model: str = "gpt-5-mini") -> dict[str, Any]:
    """A completed Responses API response object holding ``output``."""
    return {
        "id": f"resp_{abs(hash(json.dumps(output, sort_keys=True))) % 10**12}",
        "object": "response",
        "created_at": 1757687080,
        "status": "completed",
        "model": model,
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 20,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 4},
            "total_tokens": 30,
        },
    }
