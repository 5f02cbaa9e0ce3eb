"""Anthropic Messages API (``POST /v1/messages``).

All conversion to Anthropic's format happens in :func:`to_anthropic_request`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from llm_conversations.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.messages import ChatMessage, Role
from llm_conversations.tool_specs import ToolSpec

from ._wire import CallIds, int_or_zero, iter_sse, pass_through
from .base import CompletionRequest, Provider
from .errors import (
    AuthenticationError,
    InvalidRequestError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from .events import StreamEvent
from .stream import StreamAccumulator

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_TOKENS",
    "AnthropicProvider",
    "anthropic_usage",
    "to_anthropic_request",
]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "refusal": FinishReason.CONTENT_FILTER,
}
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
_STREAM_ERRORS: dict[str, type[ProviderError]] = {
    "authentication_error": AuthenticationError,
    "permission_error": AuthenticationError,
    "rate_limit_error": RateLimitError,
    "invalid_request_error": InvalidRequestError,
}


def to_anthropic_request(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    model: str,
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """Build the Messages request body.

    System messages are joined into top-level ``system``. Assistant calls
    become ``tool_use`` blocks after any text; tool results become
    ``tool_result`` blocks of a user turn. Consecutive same-role turns are
    merged (so the results of one assistant turn share one user message,
    ahead of any user text) and empty text blocks are never sent.
    """
    system = [m.content for m in messages if m.role is Role.SYSTEM]
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            continue
        blocks: list[dict[str, Any]] = []
        if message.role is Role.TOOL:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
            if message.content:
                block["content"] = message.content
            if message.is_error:
                block["is_error"] = True
            blocks.append(block)
        elif message.content:
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls or ():
            # input must be an object; a malformed call is answered by an error result.
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": dict(call.arguments),
                }
            )
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        # Anthropic wants tool_result blocks first in a user turn.
        turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    options = dict(options)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": options.pop("max_tokens", DEFAULT_MAX_TOKENS),
        "messages": turns,
    }
    if system:
        body["system"] = "\n\n".join(system)
    if tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            if t.description
            else {"name": t.name, "input_schema": t.parameters}
            for t in tools
        ]
    if "stop" in options:
        stop = options.pop("stop")
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    choice = options.pop("tool_choice", None)
    if choice is not None:
        body["tool_choice"] = (
            _TOOL_CHOICE.get(choice, choice) if isinstance(choice, str) else choice
        )
    return pass_through(body, options)


def anthropic_usage(data: object) -> Usage:
    """Input counts cache reads and writes too; ``cached`` is the cache reads."""
    if not isinstance(data, Mapping):
        return Usage()
    read = data.get("cache_read_input_tokens")
    written = int_or_zero(data.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=int_or_zero(data.get("input_tokens")) + written + int_or_zero(read),
        output_tokens=int_or_zero(data.get("output_tokens")),
        cached_tokens=read if isinstance(read, int) else None,
    )


def _finish(raw: object) -> FinishReason:
    return _FINISH.get(raw, FinishReason.OTHER) if isinstance(raw, str) else FinishReason.OTHER


class AnthropicProvider(Provider):
    """Claude models over the Messages API (``x-api-key``, ``anthropic-version``)."""

    backend = "anthropic"
    default_base_url = "https://api.anthropic.com"

    def auth_headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        body = to_anthropic_request(
            request.messages, request.tools, model=self.model, options=request.options
        )
        if request.stream:
            body["stream"] = True
        return "/v1/messages", body

    def parse_response(
        self, data: Mapping[str, Any], messages: Sequence[ChatMessage]
    ) -> CompletionResponse:
        ids = CallIds(messages)
        reply = StreamAccumulator(model=data.get("model"), raw_reason=data.get("stop_reason"))
        for block in data["content"]:
            if block.get("type") == "text":
                reply.text(block.get("text"))
            elif block.get("type") == "tool_use":
                reply.call(ids.take(block.get("id")), block["name"], block.get("input"))
        return reply.response(
            self, _finish(reply.raw_reason), anthropic_usage(data.get("usage")), raw=data
        )

    def parse_stream(
        self, response: httpx.Response, messages: Sequence[ChatMessage]
    ) -> Iterator[StreamEvent]:
        """Read the Messages events; the reply is complete at ``message_stop``."""
        ids = CallIds(messages)
        # Usage arrives in parts (input at the start, output at the end): merge them.
        reply = StreamAccumulator(raw_key="events", usage={})
        blocks: dict[int, dict[str, Any]] = {}
        stopped = False
        for sse in iter_sse(self.lines(response)):
            data = json.loads(sse.data)
            kind = data.get("type", sse.event)
            if kind == "ping":
                continue
            reply.chunk(data)
            if kind == "error":
                raise self._stream_failure(data)
            if kind == "message_start":
                message = data.get("message") or {}
                reply.keep(model=message.get("model"))
                reply.usage.update(message.get("usage") or {})
            elif kind == "content_block_start":
                block = dict(data["content_block"])
                block["partial"] = []
                blocks[data["index"]] = block
            elif kind == "content_block_delta":
                delta = data["delta"]
                if delta.get("type") == "text_delta":
                    if text := reply.text(delta.get("text")):
                        yield text
                elif delta.get("type") == "input_json_delta":
                    block = blocks[data["index"]]
                    piece = delta.get("partial_json") or ""
                    block["partial"].append(piece)
                    block["size"] = block.get("size", 0) + len(piece)
                    self.check_size(block["size"], "tool call arguments")
            elif kind == "content_block_stop":
                block = blocks.pop(data["index"], {})
                if block.get("type") == "tool_use":
                    joined = "".join(block["partial"])
                    yield reply.call(
                        ids.take(block.get("id")),
                        block["name"],
                        joined if joined else block.get("input"),
                    )
            elif kind == "message_delta":
                reply.keep(raw_reason=(data.get("delta") or {}).get("stop_reason"))
                reply.usage.update(data.get("usage") or {})
            elif kind == "message_stop":
                stopped = True
                break
        if not stopped:
            raise self.stream_ended_early("message_stop")
        yield reply.finish(self, _finish(reply.raw_reason), anthropic_usage(reply.usage))

    def _stream_failure(self, data: Mapping[str, Any]) -> ProviderError:
        error = data.get("error") or {}
        kind = error.get("type") if isinstance(error, Mapping) else None
        message = self.error_text(self.error_message(data) or str(kind))
        cls = _STREAM_ERRORS.get(kind or "", ProviderUnavailableError)
        return cls(
            f"{self.backend} reported {kind or 'an error'} in the stream: {message}",
            provider=self.backend,
            provider_message=message,
        )
