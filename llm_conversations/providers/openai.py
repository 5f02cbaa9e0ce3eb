"""OpenAI-compatible Chat Completions (OpenAI, Azure's v1 endpoint, vLLM, Groq, ...).

Messages go out as ``ChatMessage.to_wire()`` unchanged and tools as
``ToolSpec.to_wire()``: nothing is added that a compatible server might refuse.
The reasoning text servers return (``reasoning_content``, ``reasoning``, Mistral's
``thinking`` chunks) is kept with the turn and not sent back, unless the entry's
``replay_reasoning_content`` option asks for it on tool-call turns (DeepSeek's
thinking mode; docs/providers.md).
Images are ``image_url`` parts with data URLs, PDFs ``file`` parts with
``file_data``; tool results carry text only (``unsupported_content`` otherwise).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from llm_conversations.core.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.parameters import SAMPLING, ParameterSupport, RunParameters
from llm_conversations.core.reasoning import ReasoningKind

from ._wire import (
    CallIds,
    check_supported_parts,
    function_calls,
    int_or_zero,
    iter_sse,
    wire_call_id,
)
from .base import CompletionRequest, Provider
from .caching import caching_on, last_key, prefix_key
from .stream import StreamAccumulator
from .stream_events import StreamEvent

__all__ = [
    "REPLAY_OPTION",
    "OpenAIProvider",
    "openai_finish_reason",
    "openai_parameters",
    "openai_usage",
    "reasoning_text",
]

BACKEND = "openai"
# The entry option (never sent) that sends reasoning_content back on call turns.
REPLAY_OPTION = "replay_reasoning_content"
# Where compatible servers put the reasoning text: DeepSeek, Qwen and older vLLM
# say reasoning_content; OpenRouter, Groq and newer vLLM say reasoning.
_REASONING_KEYS = ("reasoning_content", "reasoning")
# Call ids OpenAI takes: any text up to 40 characters.
MAX_CALL_ID_CHARS = 40
_CALL_ID = re.compile(rf".{{1,{MAX_CALL_ID_CHARS}}}", re.DOTALL)

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


def content_text(content: object) -> str | None:
    """A message's ``content`` as text: Mistral and others send a list of typed
    chunks (``text``, ``thinking``), of which the text ones are the reply.

    Any other kind of value is a malformed reply (``TypeError``).
    """
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise TypeError(f"content is a {type(content).__name__}")
    return "".join(
        part["text"]
        for part in content
        if isinstance(part, Mapping)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    )


def reasoning_text(message: Mapping[str, Any]) -> str:
    """The reasoning text of a message or a stream delta: ``reasoning_content`` or
    ``reasoning`` as text, and Mistral's ``thinking`` content chunks."""
    pieces = [
        value for key in _REASONING_KEYS if isinstance(value := message.get(key), str) and value
    ][:1]
    content = message.get("content")
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, Mapping) or part.get("type") != "thinking":
            continue
        thinking = part.get("thinking")
        if isinstance(thinking, str):
            pieces.append(thinking)
        for chunk in thinking if isinstance(thinking, list) else ():
            if isinstance(chunk, Mapping) and isinstance(chunk.get("text"), str):
                pieces.append(chunk["text"])
    return "".join(pieces)


def _wire_message(message: ChatMessage, replay: bool) -> dict[str, Any]:
    wire = message.to_wire()
    # OpenAI refuses a call id over 40 characters (string_above_max_length),
    # which other OpenAI-compatible servers make (vLLM's chatcmpl-tool-<hex>).
    for call in wire.get("tool_calls") or ():
        call["id"] = wire_call_id(call["id"], _CALL_ID, MAX_CALL_ID_CHARS)
    if message.tool_call_id:
        wire["tool_call_id"] = wire_call_id(message.tool_call_id, _CALL_ID, MAX_CALL_ID_CHARS)
    if replay and message.tool_calls:
        text = "".join(
            part.text
            for part in message.reasoning or ()
            if part.provider == BACKEND and part.kind is ReasoningKind.THINKING
        )
        if text:
            wire["reasoning_content"] = text
    return wire


def openai_usage(data: object) -> Usage:
    """Read ``usage`` (``prompt_tokens_details.cached_tokens`` and
    ``completion_tokens_details.reasoning_tokens`` when reported)."""
    if not isinstance(data, Mapping):
        return Usage()
    details = data.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    output_details = data.get("completion_tokens_details")
    reasoning = (
        output_details.get("reasoning_tokens") if isinstance(output_details, Mapping) else None
    )
    input_tokens = int_or_zero(data.get("prompt_tokens"))
    output_tokens = int_or_zero(data.get("completion_tokens"))
    total = data.get("total_tokens")
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=total if isinstance(total, int) else None,
        cached_tokens=cached if isinstance(cached, int) else None,
        reasoning_tokens=reasoning if isinstance(reasoning, int) else None,
    )


# The content parts each role may carry in Chat Completions.
SUPPORTED_PARTS = {
    "user": frozenset({"text", "image", "file"}),
    "tool": frozenset({"text"}),
}

# Run parameters sent under their own name.
_SAME_NAME = ("temperature", "top_p", "seed", "reasoning_effort", "parallel_tool_calls")


def openai_parameters(parameters: RunParameters) -> dict[str, Any]:
    """The Chat Completions fields of a run's parameters (those that are set).

    ``max_output_tokens`` is ``max_completion_tokens`` (``max_tokens`` is
    deprecated and refused by reasoning models); ``response_format`` is a
    ``json_schema`` format, ``strict`` when the schema fits strict mode.
    """
    fields: dict[str, Any] = {
        name: getattr(parameters, name)
        for name in _SAME_NAME
        if getattr(parameters, name) is not None
    }
    if parameters.max_output_tokens is not None:
        fields["max_completion_tokens"] = parameters.max_output_tokens
    if parameters.stop is not None:
        fields["stop"] = list(parameters.stop)
    choice = parameters.tool_choice
    if choice is not None:
        fields["tool_choice"] = (
            {"type": "function", "function": {"name": choice.name}}
            if choice.mode == "tool"
            else choice.mode
        )
    response_format = parameters.response_format
    if response_format is not None:
        fields["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": response_format.name,
                "schema": response_format.schema,
                "strict": response_format.strict,
            },
        }
    return fields


class OpenAIProvider(Provider):
    """Chat Completions at ``{base_url}/chat/completions`` with a Bearer key."""

    backend = BACKEND
    default_base_url = "https://api.openai.com/v1"
    parameter_support = ParameterSupport(
        sampling=frozenset(SAMPLING),
        reasoning_efforts=frozenset({"none", "minimal", "low", "medium", "high", "xhigh"}),
        tool_choices=frozenset({"auto", "none", "required", "tool"}),
        parallel_tool_calls=frozenset({True, False}),
        response_format=True,
        max_stop_sequences=4,
    )

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        check_supported_parts(request.messages, self.backend, SUPPORTED_PARTS)
        options = dict(request.options)
        replay = options.pop(REPLAY_OPTION, False) is True
        cache = caching_on(options)
        body: dict[str, Any] = {**options, "model": request.model}
        if request.tools:
            body["tools"] = [spec.to_wire() for spec in request.tools]
        if cache and self.base_url == self.default_base_url:
            # OpenAI's own API only: a compatible server may refuse the unknown field.
            body.setdefault("prompt_cache_key", prefix_key(request.messages))
        body["messages"] = [_wire_message(message, replay) for message in request.messages]
        fields = openai_parameters(request.parameters)
        if "max_completion_tokens" in fields:
            # The run's limit replaces an entry's max_tokens option; both would be refused.
            body.pop("max_tokens", None)
        body.update(fields)
        if request.stream:
            body["stream"] = True
            extra = request.options.get("stream_options")
            body["stream_options"] = {**(extra or {}), "include_usage": True}
        # The conversation last: each round's bytes extend the last round's.
        return "/chat/completions", last_key(body, "messages")

    def parse_response(
        self, data: Mapping[str, Any], messages: Sequence[ChatMessage]
    ) -> CompletionResponse:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        reply = StreamAccumulator(model=data.get("model"), raw_reason=choice.get("finish_reason"))
        reply.reason(ReasoningKind.THINKING, reasoning_text(message))
        reply.text(content_text(message.get("content")))
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
        zero), and so is one held open after both without ``[DONE]`` (once a read
        stalls for ``TIMEOUT``), and so is one whose usage and ``[DONE]`` arrive
        without any finish reason. A stream without a finish reason that stops
        before its usage and ``[DONE]`` ended early and raises. Call fragments are gathered by their
        ``index`` in any order (parallel calls may interleave, as the official
        SDK allows) and reported, in index order, when the choice finishes.
        """
        ids = CallIds(messages)
        reply = StreamAccumulator()
        # Call fragments gathered by index (_gather_fragment).
        pending: dict[int, dict[str, str]] = {}
        finished = done = False
        # Usage comes after the finish reason; with both, only [DONE] is missing.
        lines = self.lines(
            response, complete=lambda: bool(reply.raw_reason) and reply.usage is not None
        )
        for event in iter_sse(lines):
            if event.data == "[DONE]":
                done = True
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
                thinking = reasoning_text(delta)
                reply.reason(ReasoningKind.THINKING, thinking)
                self.check_size(reply.reasoning_chars, "reasoning")
                if thought := reply.thought(thinking):
                    yield thought
                if text := reply.text(content_text(delta.get("content"))):
                    yield text
                for fragment in delta.get("tool_calls") or ():
                    arguments = _gather_fragment(pending, fragment)
                    self.check_size(len(arguments), "tool call arguments")
                if choice.get("finish_reason") and not finished:
                    finished = True
                    reply.keep(raw_reason=choice["finish_reason"])
                    yield from _gathered_calls(reply, ids, pending)
        if not finished:
            # Some servers (OpenRouter) end a whole reply with usage and [DONE] but
            # no finish_reason; the official SDK takes it, and so does this.
            if not (done and reply.usage is not None):
                raise self.stream_ended_early("a finish_reason")
            yield from _gathered_calls(reply, ids, pending)
            reply.keep(raw_reason=None if reply.has_calls else "stop")
        yield reply.finish(self, *self._ending(reply, reply.usage))

    @staticmethod
    def _ending(reply: StreamAccumulator, usage: object) -> tuple[FinishReason, Usage]:
        return openai_finish_reason(reply.raw_reason, reply.has_calls), openai_usage(usage)


def _gather_fragment(pending: dict[int, dict[str, str]], fragment: Mapping[str, Any]) -> str:
    """Add a streamed call fragment to its call (by ``index``: id and name come in
    the first fragment only); the call's arguments so far."""
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
    return slot["args"]


def _gathered_calls(
    reply: StreamAccumulator, ids: CallIds, pending: dict[int, dict[str, str]]
) -> Iterator[StreamEvent]:
    """The gathered calls, in index order, as the reply's calls; none is left pending."""
    for index in sorted(pending):
        slot = pending[index]
        yield reply.call(ids.take(slot["id"]), slot["name"], slot["args"])
    pending.clear()
