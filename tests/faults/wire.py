"""The five wire protocols as a fake provider server answers them.

Each protocol renders a reply (text, tool calls, a finish kind) as its
non-streamed body or its stream, the stream's end marker separately so a
test can leave it out, an error body, and bodies that lack the fields the
adapter needs. Tool-call arguments are given as JSON *text* and placed in
the body as they are, so a test can send what ``json.dumps`` never writes
(``1e400``, ``"\\u0000"``, ``"\\ud800"``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PROTOCOLS", "Call", "Protocol", "Rendered", "protocol_of"]

MODEL = "fault-model"
# Finish kinds: stop, tool (the reply calls tools), filter (a refusal), length.
Call = tuple[str, str, str]
"""A tool call: id, name and arguments as JSON text."""


@dataclass(frozen=True)
class Rendered:
    """A body to send: its content type, and for streams the end marker apart."""

    content_type: str
    body: bytes
    end: bytes = b""

    @property
    def whole(self) -> bytes:
        return self.body + self.end


class _Raw:
    """JSON text placed in a body as it is."""

    counter = itertools.count()

    def __init__(self, text: str) -> None:
        self.text = text
        self.token = f"@@raw{next(self.counter)}@@"


def dump(value: Any) -> str:
    """``json.dumps`` where every ``_Raw`` is replaced by its text."""
    raws: list[_Raw] = []

    def walk(item: Any) -> Any:
        if isinstance(item, _Raw):
            raws.append(item)
            return item.token
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    text = json.dumps(walk(value))
    for raw in raws:
        text = text.replace(json.dumps(raw.token), raw.text)
    return text


def sse(*events: tuple[str | None, Any]) -> bytes:
    out = []
    for name, data in events:
        if name:
            out.append(f"event: {name}\n")
        out.append(f"data: {data if isinstance(data, str) else dump(data)}\n\n")
    return "".join(out).encode()


def ndjson(*lines: Any) -> bytes:
    return "".join(dump(line) + "\n" for line in lines).encode()


def pieces(text: str) -> list[str]:
    """The text in a few deltas, as a stream sends it."""
    size = max(1, len(text) // 3 + 1) if len(text) < 300 else 100
    return [text[i : i + size] for i in range(0, len(text), size)]


class Protocol:
    name: str = ""
    finish_words: dict[str, str] = {}

    def reply(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        raise NotImplementedError

    def stream(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        raise NotImplementedError

    def error(self, status: int, message: str) -> bytes:
        return json.dumps({"error": {"code": status, "message": message}}).encode()

    def missing_fields(self, stream: bool) -> Rendered:
        raise NotImplementedError

    def invalid_json(self, stream: bool) -> Rendered:
        raise NotImplementedError


class OpenAI(Protocol):
    name = "openai"
    finish_words = {
        "stop": "stop",
        "tool": "tool_calls",
        "filter": "content_filter",
        "length": "length",
    }

    def _calls(self, calls: Sequence[Call]) -> list[dict[str, Any]]:
        return [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]

    def reply(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = self._calls(calls)
        body = {
            "id": "chatcmpl-fault",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [
                {"index": 0, "message": message, "finish_reason": self.finish_words[finish]}
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": _Raw(str(usage)), "total_tokens": 8},
        }
        return Rendered("application/json", dump(body).encode())

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fault",
            "object": "chat.completion.chunk",
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def stream(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        events: list[tuple[str | None, Any]] = [(None, self._chunk({"role": "assistant"}))]
        events += [(None, self._chunk({"content": piece})) for piece in pieces(text)]
        for index, (i, n, a) in enumerate(calls):
            head = {"index": index, "id": i, "type": "function", "function": {"name": n}}
            head["function"]["arguments"] = ""
            events.append((None, self._chunk({"tool_calls": [head]})))
            events.append(
                (
                    None,
                    self._chunk({"tool_calls": [{"index": index, "function": {"arguments": a}}]}),
                )
            )
        end = sse(
            (None, self._chunk({}, self.finish_words[finish])),
            (
                None,
                {
                    "id": "chatcmpl-fault",
                    "object": "chat.completion.chunk",
                    "model": MODEL,
                    "choices": [],
                    "usage": {"prompt_tokens": 5, "completion_tokens": _Raw(str(usage))},
                },
            ),
            (None, "[DONE]"),
        )
        return Rendered("text/event-stream", sse(*events), end)

    def missing_fields(self, stream: bool) -> Rendered:
        if stream:
            chunk = {"id": "chatcmpl-fault", "object": "chat.completion.chunk"}
            return Rendered(
                "text/event-stream", sse((None, chunk), (None, chunk), (None, "[DONE]"))
            )
        return Rendered(
            "application/json", b'{"id": "chatcmpl-fault", "object": "chat.completion"}'
        )

    def invalid_json(self, stream: bool) -> Rendered:
        if stream:
            good = sse((None, self._chunk({"content": "Hel"})))
            return Rendered("text/event-stream", good + b'data: {"choices": [{"delta": \n\n')
        return Rendered("application/json", b'{"choices": [{"message": {"content": "Hel')


class Anthropic(Protocol):
    name = "anthropic"
    finish_words = {
        "stop": "end_turn",
        "tool": "tool_use",
        "filter": "refusal",
        "length": "max_tokens",
    }

    def error(self, status: int, message: str) -> bytes:
        kind = "overloaded_error" if status >= 500 else "rate_limit_error"
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()

    def reply(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        content: list[Any] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": i, "name": n, "input": _Raw(a)} for i, n, a in calls]
        body = {
            "id": "msg_fault",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": self.finish_words[finish],
            "usage": {"input_tokens": 5, "output_tokens": _Raw(str(usage))},
        }
        return Rendered("application/json", dump(body).encode())

    def stream(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        start = {
            "type": "message_start",
            "message": {
                "id": "msg_fault",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [],
                "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        }
        events: list[tuple[str | None, Any]] = [("message_start", start)]
        index = 0
        if text:
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            for piece in pieces(text):
                delta = {"type": "text_delta", "text": piece}
                events.append(
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": 0, "delta": delta},
                    )
                )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
            index = 1
        for i, n, a in calls:
            block = {"type": "tool_use", "id": i, "name": n, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": a}
            events += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": block},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": index}),
            ]
            index += 1
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self.finish_words[finish]},
                    "usage": {"output_tokens": _Raw(str(usage))},
                },
            )
        )
        end = sse(("message_stop", {"type": "message_stop"}))
        return Rendered("text/event-stream", sse(*events), end)

    def missing_fields(self, stream: bool) -> Rendered:
        if stream:
            start = {"type": "message_start", "message": {"model": MODEL, "usage": {}}}
            return Rendered(
                "text/event-stream",
                sse(
                    ("message_start", start),
                    ("content_block_delta", {"type": "content_block_delta"}),
                    ("message_stop", {"type": "message_stop"}),
                ),
            )
        return Rendered("application/json", b'{"id": "msg_fault", "type": "message"}')

    def invalid_json(self, stream: bool) -> Rendered:
        if stream:
            start = {"type": "message_start", "message": {"model": MODEL, "usage": {}}}
            return Rendered(
                "text/event-stream",
                sse(("message_start", start)) + b'event: content_block_start\ndata: {"type": \n\n',
            )
        return Rendered("application/json", b'{"content": [{"type": "text", "text": "Hel')


class Gemini(Protocol):
    name = "gemini"
    finish_words = {"stop": "STOP", "tool": "STOP", "filter": "SAFETY", "length": "MAX_TOKENS"}

    def _parts(self, text: str, calls: Sequence[Call]) -> list[Any]:
        parts: list[Any] = [{"text": text}] if text else []
        return parts + [{"functionCall": {"name": n, "args": _Raw(a)}} for _, n, a in calls]

    def _usage(self, usage: Any) -> dict[str, Any]:
        return {
            "promptTokenCount": 5,
            "candidatesTokenCount": _Raw(str(usage)),
            "totalTokenCount": 8,
        }

    def reply(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        candidate: dict[str, Any] = {"finishReason": self.finish_words[finish], "index": 0}
        parts = self._parts(text, calls)
        if parts:
            candidate["content"] = {"role": "model", "parts": parts}
        body = {
            "candidates": [candidate],
            "usageMetadata": self._usage(usage),
            "modelVersion": MODEL,
        }
        return Rendered("application/json", dump(body).encode())

    def stream(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        chunks = [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": p}]}, "index": 0}]}
            for p in pieces(text)
        ]
        if calls:
            chunks.append(
                {"candidates": [{"content": {"role": "model", "parts": self._parts("", calls)}}]}
            )
        last: dict[str, Any] = {"finishReason": self.finish_words[finish], "index": 0}
        end = sse(
            (
                None,
                {"candidates": [last], "usageMetadata": self._usage(usage), "modelVersion": MODEL},
            )
        )
        return Rendered("text/event-stream", sse(*((None, c) for c in chunks)), end)

    def missing_fields(self, stream: bool) -> Rendered:
        chunk = {"modelVersion": MODEL, "usageMetadata": {"promptTokenCount": 5}}
        if stream:
            return Rendered("text/event-stream", sse((None, chunk), (None, chunk)))
        return Rendered("application/json", json.dumps(chunk).encode())

    def invalid_json(self, stream: bool) -> Rendered:
        if stream:
            first = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]}
            return Rendered("text/event-stream", sse((None, first)) + b'data: {"candidates": [\n\n')
        return Rendered("application/json", b'{"candidates": [{"content": {"parts": [{"text": "Hel')


class Ollama(Protocol):
    name = "ollama"
    # Ollama has no content filter: its "refusal" case is a reply cut at num_predict.
    finish_words = {"stop": "stop", "tool": "stop", "filter": "length", "length": "length"}

    def error(self, status: int, message: str) -> bytes:
        return json.dumps({"error": message}).encode()

    def _message(self, text: str, calls: Sequence[Call]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [
                {"function": {"name": n, "arguments": _Raw(a)}} for _, n, a in calls
            ]
        return message

    def _done(self, finish: str, usage: Any, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "model": MODEL,
            "created_at": "2025-01-20T09:00:00Z",
            "message": message,
            "done": True,
            "done_reason": self.finish_words[finish],
            "prompt_eval_count": 5,
            "eval_count": _Raw(str(usage)),
        }

    def reply(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        body = self._done(finish, usage, self._message(text, calls))
        return Rendered("application/json", dump(body).encode())

    def stream(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        lines = [
            {"model": MODEL, "message": {"role": "assistant", "content": p}, "done": False}
            for p in pieces(text)
        ]
        if calls:
            lines.append({"model": MODEL, "message": self._message("", calls), "done": False})
        end = ndjson(self._done(finish, usage, {"role": "assistant", "content": ""}))
        return Rendered("application/x-ndjson", ndjson(*lines), end)

    def missing_fields(self, stream: bool) -> Rendered:
        if stream:
            return Rendered("application/x-ndjson", ndjson({"model": MODEL}, {"model": MODEL}))
        return Rendered("application/json", json.dumps({"model": MODEL, "done": True}).encode())

    def invalid_json(self, stream: bool) -> Rendered:
        if stream:
            first = {"model": MODEL, "message": {"role": "assistant", "content": "Hel"}}
            return Rendered("application/x-ndjson", ndjson(first) + b'{"message": {"cont\n')
        return Rendered("application/json", b'{"message": {"role": "assistant", "content": "Hel')


class Responses(Protocol):
    """OpenAI's Responses API: output items, and a stream of typed events."""

    name = "openai_responses"
    # The finish kinds as a response's (status, incomplete_details.reason).
    finish_words = {
        "stop": "completed",
        "tool": "completed",
        "filter": "content_filter",
        "length": "max_output_tokens",
    }

    def _response(self, finish: str, usage: Any, output: list[Any]) -> dict[str, Any]:
        word = self.finish_words[finish]
        done = word == "completed"
        return {
            "id": "resp_fault",
            "object": "response",
            "model": MODEL,
            "status": "completed" if done else "incomplete",
            "incomplete_details": None if done else {"reason": word},
            "output": output,
            "usage": {"input_tokens": 5, "output_tokens": _Raw(str(usage)), "total_tokens": 8},
        }

    def _output(self, text: str, calls: Sequence[Call]) -> list[Any]:
        output: list[Any] = []
        if text:
            part = {"type": "output_text", "text": text, "annotations": []}
            output.append(
                {
                    "type": "message",
                    "id": "msg_fault",
                    "role": "assistant",
                    "status": "completed",
                    "content": [part],
                }
            )
        output += [
            {
                "type": "function_call",
                "id": f"fc_{i}",
                "call_id": i,
                "name": n,
                "arguments": a,
                "status": "completed",
            }
            for i, n, a in calls
        ]
        return output

    def error(self, status: int, message: str) -> bytes:
        kind = "server_error" if status >= 500 else "rate_limit_exceeded"
        return json.dumps({"error": {"type": kind, "code": kind, "message": message}}).encode()

    def reply(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        body = self._response(finish, usage, self._output(text, calls))
        return Rendered("application/json", dump(body).encode())

    def stream(self, text: str, calls: Sequence[Call], finish: str, *, usage: Any = 3) -> Rendered:
        start = self._response("stop", 0, [])
        start["status"] = "in_progress"
        events: list[tuple[str | None, Any]] = [
            ("response.created", {"type": "response.created", "response": start})
        ]
        index = 0
        if text:
            item = {"type": "message", "id": "msg_fault", "role": "assistant", "content": []}
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": 0, "item": item},
                )
            )
            for piece in pieces(text):
                events.append(
                    (
                        "response.output_text.delta",
                        {
                            "type": "response.output_text.delta",
                            "output_index": 0,
                            "content_index": 0,
                            "item_id": "msg_fault",
                            "delta": piece,
                        },
                    )
                )
            (message,) = self._output(text, ())
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": 0, "item": message},
                )
            )
            index = 1
        for call in calls:
            (done,) = self._output("", [call])
            added = {**done, "arguments": "", "status": "in_progress"}
            events += [
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": index, "item": added},
                ),
                (
                    "response.function_call_arguments.delta",
                    {
                        "type": "response.function_call_arguments.delta",
                        "output_index": index,
                        "item_id": done["id"],
                        "delta": _Raw(json.dumps(call[2])),
                    },
                ),
                (
                    "response.function_call_arguments.done",
                    {
                        "type": "response.function_call_arguments.done",
                        "output_index": index,
                        "item_id": done["id"],
                        "arguments": _Raw(json.dumps(call[2])),
                    },
                ),
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": index, "item": done},
                ),
            ]
            index += 1
        final = self._response(finish, usage, self._output(text, calls))
        kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
        end = sse((kind, {"type": kind, "response": final}))
        return Rendered("text/event-stream", sse(*events), end)

    def missing_fields(self, stream: bool) -> Rendered:
        if stream:
            bare = {"type": "response.output_item.done", "output_index": 0}
            return Rendered(
                "text/event-stream",
                sse(
                    ("response.output_item.done", bare),
                    ("response.completed", {"type": "response.completed"}),
                ),
            )
        return Rendered("application/json", b'{"id": "resp_fault", "object": "response"}')

    def invalid_json(self, stream: bool) -> Rendered:
        if stream:
            delta = {"type": "response.output_text.delta", "output_index": 0, "delta": "Hel"}
            return Rendered(
                "text/event-stream",
                sse(("response.output_text.delta", delta))
                + b'event: response.output_text.delta\ndata: {"type": \n\n',
            )
        return Rendered("application/json", b'{"output": [{"type": "message", "content": [{"te')


PROTOCOLS: dict[str, Protocol] = {
    p.name: p for p in (OpenAI(), Anthropic(), Gemini(), Ollama(), Responses())
}


def protocol_of(path: str) -> Protocol:
    """The protocol a request path belongs to."""
    if path.endswith("/responses"):
        return PROTOCOLS["openai_responses"]
    if path.endswith("/chat/completions"):
        return PROTOCOLS["openai"]
    if path.endswith("/v1/messages"):
        return PROTOCOLS["anthropic"]
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return PROTOCOLS["gemini"]
    if path.endswith("/api/chat"):
        return PROTOCOLS["ollama"]
    raise AssertionError(f"no protocol serves {path}")
