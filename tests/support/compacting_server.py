"""A fake provider on 127.0.0.1 that compacts as Anthropic and OpenAI do, for
long-conversation tests.

It answers ``POST /v1/messages`` (Anthropic) and ``POST /v1/responses`` (OpenAI
Responses): it reads a request from its latest compacted state on (the
provider ignores what comes before), counts what is left (a character count
over four), and when that passes the request's compaction trigger its reply
carries a new compacted state: a ``compaction`` block ahead of the text
(Anthropic's ``compact_20260112`` edit), or a ``compaction`` item after the
message (OpenAI's ``compaction`` entry). Every request body is kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.http_server import LocalHTTPServer

__all__ = ["CompactingServer", "compacting_server", "read_tokens"]


def _is_state(entry: dict[str, Any]) -> bool:
    """Whether an Anthropic turn or a Responses item is (or holds) a compacted state."""
    if entry.get("type") == "compaction":
        return True
    content = entry.get("content")
    return isinstance(content, list) and any(b.get("type") == "compaction" for b in content)


def read_tokens(entries: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """Where the provider starts reading ``entries`` (turns or items: its latest
    compacted state, else 0), and the tokens it reads from there."""
    start = 0
    for index, entry in enumerate(entries):
        if _is_state(entry):
            start = index
    return start, len(json.dumps(entries[start:])) // 4


class CompactingServer:
    """Answers each request with ``answer <n>``; ``compactions`` holds the states made."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.compactions: list[str] = []
        self.server = LocalHTTPServer(self._respond)

    @property
    def base_url(self) -> str:
        return self.server.root

    def _state(self) -> str:
        state = f"State {len(self.compactions) + 1}: the user asked {len(self.requests)} times."
        self.compactions.append(state)
        return state

    def _anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        (edit,) = (
            e for e in body["context_management"]["edits"] if e["type"] == "compact_20260112"
        )
        _start, tokens = read_tokens(body["messages"])
        content: list[dict[str, Any]] = []
        if tokens > edit["trigger"]["value"]:
            content.append({"type": "compaction", "content": self._state()})
        content.append({"type": "text", "text": f"answer {len(self.requests)}"})
        return {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "end_turn",
            "usage": {"input_tokens": tokens, "output_tokens": 5},
        }

    def _responses(self, body: dict[str, Any]) -> dict[str, Any]:
        (entry,) = (e for e in body["context_management"] if e["type"] == "compaction")
        _start, tokens = read_tokens(body["input"])
        n = len(self.requests)
        text = {"type": "output_text", "text": f"answer {n}", "annotations": []}
        output: list[dict[str, Any]] = [
            {"type": "message", "id": f"msg_{n}", "role": "assistant", "content": [text]}
        ]
        if tokens > entry["compact_threshold"]:
            output.append(
                {"type": "compaction", "id": f"cmp_{n}", "encrypted_content": self._state()}
            )
        return {
            "id": f"resp_{n}",
            "object": "response",
            "status": "completed",
            "model": body["model"],
            "output": output,
            "usage": {"input_tokens": tokens, "output_tokens": 5},
        }

    def _respond(self, handler: BaseHTTPRequestHandler) -> None:
        body = json.loads(getattr(handler, "body", b"") or b"{}")
        self.requests.append(body)
        reply = self._anthropic(body) if handler.path == "/v1/messages" else self._responses(body)
        payload = json.dumps(reply).encode()
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)


@contextmanager
def compacting_server() -> Iterator[CompactingServer]:
    """A :class:`CompactingServer` for the ``with`` block."""
    server = CompactingServer()
    try:
        yield server
    finally:
        server.server.close()
