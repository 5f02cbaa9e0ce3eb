"""OpenAI-compatible Chat Completions (OpenAI, Azure's v1 endpoint, vLLM, Groq, ...).

Messages go out as ``ChatMessage.to_wire()`` unchanged and tools as
``ToolSpec.to_wire()``: nothing is added that a compatible server might refuse.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from llm_conversations.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.messages import ChatMessage

from ._wire import CallIds, function_calls, int_or_zero, iter_sse
from .base import CompletionRequest, Provider
from .events import StreamEvent
from .stream import StreamAccumulator

__all__ = ["OpenAIProvider", "openai_finish_reason", "openai_usage"]

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def openai_finish_reason(raw: object, has_calls: bool) -> FinishReason:
    """Normalise ``finish_reason``; some compatible servers say "stop" beside calls."""
    if has_calls and raw in (None, "stop"):
        return FinishReason.TOOL_CALLS
    return _FINISH.get(raw, FinishReason.OTHER) if isinstance(raw, str) else FinishReason.OTHER


def openai_usage(data: object) -> Usage:
    """Read ``usage`` (``prompt_tokens_details.cached_tokens`` when reported)."""
    if not isinstance(data, Mapping):
        return Usage()
    details = data.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    input_tokens = int_or_zero(data.get("prompt_tokens"))
    output_tokens = int_or_zero(data.get("completion_tokens"))
    total = data.get("total_tokens")
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=total if isinstance(total, int) else None,
        cached_tokens=cached if isinstance(cached, int) else None,
    )


class OpenAIProvider(Provider):
    """Chat Completions at ``{base_url}/chat/completions`` with a Bearer key."""

    backend = "openai"
    default_base_url = "https://api.openai.com/v1"

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {**request.options, "model": self.model}
        body["messages"] = [message.to_wire() for message in request.messages]
        if request.tools:
            body["tools"] = [spec.to_wire() for spec in request.tools]
        if request.stream:
            body["stream"] = True
            extra = request.options.get("stream_options")
            body["stream_options"] = {**(extra or {}), "include_usage": True}
        return "/chat/completions", body

    def parse_response(
        self, data: Mapping[str, Any], messages: Sequence[ChatMessage]
    ) -> CompletionResponse:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        reply = StreamAccumulator(model=data.get("model"), raw_reason=choice.get("finish_reason"))
        reply.text(message.get("content"))
        for parts in function_calls(message.get("tool_calls"), CallIds(messages)):
            reply.call(*parts)
        return reply.response(self, *self._ending(reply, data.get("usage")), raw=data)

    def parse_stream(
        self, response: httpx.Response, messages: Sequence[ChatMessage]
    ) -> Iterator[StreamEvent]:
        """Read the SSE chunks of choice 0.

        The reply is complete when choice 0 has a ``finish_reason``; a usage
        chunk and ``data: [DONE]`` normally follow, and a stream that closes
        after the finish reason without them is accepted (usage is then
        zero). A stream without a finish reason, or with ``[DONE]`` before
        one, ended early and raises. Call fragments are gathered by their
        ``index`` in any order (parallel calls may interleave, as the official
        SDK allows) and reported, in index order, when the choice finishes.
        """
        ids = CallIds(messages)
        reply = StreamAccumulator()
        # Fragments keyed by index: id and name come in the first one only.
        pending: dict[int, dict[str, str]] = {}
        finished = False
        for event in iter_sse(self.lines(response)):
            if event.data == "[DONE]":
                break
            chunk = json.loads(event.data)
            if isinstance(chunk, Mapping) and chunk.get("error"):
                raise self.stream_error(chunk)
            reply.chunk(chunk)
            reply.keep(model=chunk.get("model"), usage=chunk.get("usage"))
            for choice in chunk.get("choices") or ():
                if choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta") or {}
                if text := reply.text(delta.get("content")):
                    yield text
                for fragment in delta.get("tool_calls") or ():
                    index = fragment.get("index", len(pending))
                    slot = pending.setdefault(index, {"id": "", "name": "", "args": ""})
                    function = fragment.get("function") or {}
                    slot["id"] = slot["id"] or fragment.get("id") or ""
                    slot["name"] = slot["name"] or function.get("name") or ""
                    arguments = function.get("arguments")
                    if isinstance(arguments, str):
                        slot["args"] += arguments
                    elif arguments is not None:
                        slot["args"] += json.dumps(arguments)
                    self.check_size(len(slot["args"]), "tool call arguments")
                if choice.get("finish_reason") and not finished:
                    finished = True
                    reply.keep(raw_reason=choice["finish_reason"])
                    for index in sorted(pending):
                        slot = pending[index]
                        yield reply.call(ids.take(slot["id"]), slot["name"], slot["args"])
                    pending.clear()
        if not finished:
            raise self.stream_ended_early("a finish_reason")
        yield reply.finish(self, *self._ending(reply, reply.usage))

    @staticmethod
    def _ending(reply: StreamAccumulator, usage: object) -> tuple[FinishReason, Usage]:
        return openai_finish_reason(reply.raw_reason, reply.has_calls), openai_usage(usage)
