"""Ollama's native chat API (``POST /api/chat``, NDJSON streaming).

All conversion to Ollama's format happens in :func:`to_ollama_request`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from llm_conversations.core.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.core.content_parts import ImagePart
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.parameters import SAMPLING, ParameterSupport, RunParameters
from llm_conversations.core.reasoning import ReasoningKind
from llm_conversations.core.tool_specs import ToolSpec

from ._wire import (
    CallIds,
    check_supported_parts,
    function_calls,
    int_or_zero,
    iter_ndjson,
    merge_fields,
    pass_through,
    tool_names_by_id,
)
from .base import CompletionRequest, Provider
from .caching import last_key
from .stream import StreamAccumulator
from .stream_events import StreamEvent

__all__ = ["OllamaProvider", "ollama_parameters", "ollama_usage", "to_ollama_request"]

BACKEND = "ollama"

# Sampling options that Ollama reads from the nested "options" object.
_MODEL_OPTIONS = {
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "num_ctx",
    "num_predict",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
}


_NONE = RunParameters()


def ollama_parameters(parameters: RunParameters) -> dict[str, Any]:
    """The ``/api/chat`` fields of a run's parameters (those that are set).

    Sampling goes in ``options`` (``max_output_tokens`` is ``num_predict``);
    ``reasoning_effort`` is ``think`` (``none`` is ``false``);
    ``response_format`` is ``format`` with the schema. ``tool_choice: none``
    is honoured by sending no tools (in :func:`to_ollama_request`).
    """
    sampling: dict[str, Any] = {
        name: getattr(parameters, name)
        for name in ("temperature", "top_p", "seed")
        if getattr(parameters, name) is not None
    }
    if parameters.max_output_tokens is not None:
        sampling["num_predict"] = parameters.max_output_tokens
    if parameters.stop is not None:
        sampling["stop"] = list(parameters.stop)
    fields: dict[str, Any] = {"options": sampling} if sampling else {}
    effort = parameters.reasoning_effort
    if effort is not None:
        fields["think"] = False if effort == "none" else effort
    if parameters.response_format is not None:
        fields["format"] = parameters.response_format.schema
    return fields


# Images on user turns (the message's ``images``); no documents.
SUPPORTED_PARTS = {"user": frozenset({"text", "image"}), "tool": frozenset({"text"})}


def to_ollama_request(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    model: str,
    stream: bool,
    options: Mapping[str, Any],
    parameters: RunParameters | None = None,
) -> dict[str, Any]:
    """Build the ``/api/chat`` body.

    An assistant turn Ollama answered carries its ``thinking`` back (the
    model's chat template decides what to show the model of it; reasoning of
    other providers is never sent). Tool call arguments are sent as objects and each tool message names its
    function in ``tool_name`` (looked up from the call id). Sampling options
    (``max_tokens`` becomes ``num_predict``) go in the nested ``options``.
    Images go in the message's ``images`` list as base64 (its text parts are
    the ``content``). ``parameters`` (:func:`ollama_parameters`) override what
    ``options`` set.
    """
    check_supported_parts(messages, "ollama", SUPPORTED_PARTS)
    names = tool_names_by_id(messages)
    wire: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role.value, "content": message.content}
        images = [part.base64() for part in message.parts or () if isinstance(part, ImagePart)]
        if images:
            item["images"] = images
        thinking = "".join(
            part.text
            for part in message.reasoning or ()
            if part.provider == BACKEND and part.kind is ReasoningKind.THINKING
        )
        if thinking:
            item["thinking"] = thinking
        if message.tool_calls:
            # arguments must be an object; a malformed call is answered by an error result.
            item["tool_calls"] = [
                {"function": {"name": call.name, "arguments": dict(call.arguments)}}
                for call in message.tool_calls
            ]
        if message.role is Role.TOOL:
            item["tool_name"] = names.get(message.tool_call_id or "", "unknown")
        wire.append(item)
    body: dict[str, Any] = {"model": model, "messages": wire, "stream": stream}
    if tools:
        body["tools"] = [spec.to_wire() for spec in tools]
    options = dict(options)
    sampling = dict(options.pop("options", {}) or {})
    if "max_tokens" in options:
        sampling["num_predict"] = options.pop("max_tokens")
    for key in _MODEL_OPTIONS & set(options):
        sampling[key] = options.pop(key)
    if sampling:
        body["options"] = sampling
    parameters = parameters or _NONE
    choice = parameters.tool_choice
    if choice is not None and choice.mode == "none":
        # Ollama has no tool choice; a model offered no tools calls none.
        body.pop("tools", None)
    return merge_fields(pass_through(body, options), ollama_parameters(parameters))


def ollama_usage(data: Mapping[str, Any]) -> Usage:
    """Input from ``prompt_eval_count``, output from ``eval_count``."""
    return Usage(
        input_tokens=int_or_zero(data.get("prompt_eval_count")),
        output_tokens=int_or_zero(data.get("eval_count")),
    )


def _finish(raw: object, has_calls: bool) -> FinishReason:
    # Ollama reports "stop" beside tool calls.
    if has_calls and raw in ("stop", None):
        return FinishReason.TOOL_CALLS
    if raw == "stop":
        return FinishReason.STOP
    if raw == "length":
        return FinishReason.LENGTH
    return FinishReason.OTHER


def _ending(reply: StreamAccumulator, final: Mapping[str, Any]) -> tuple[FinishReason, Usage]:
    return _finish(reply.raw_reason, reply.has_calls), ollama_usage(final)


class OllamaProvider(Provider):
    """A local (or remote) Ollama server; no key unless a proxy wants a Bearer token."""

    backend = BACKEND
    default_base_url = "http://127.0.0.1:11434"
    parameter_support = ParameterSupport(
        sampling=frozenset(SAMPLING),
        reasoning_efforts=frozenset({"none", "low", "medium", "high"}),
        # No tool choice in the API: "none" is honoured by offering no tools.
        tool_choices=frozenset({"auto", "none"}),
        parallel_tool_calls=frozenset({True}),
        response_format=True,
    )

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        body = to_ollama_request(
            request.messages,
            request.tools,
            model=request.model,
            stream=request.stream,
            options=request.options,
            parameters=request.parameters,
        )
        # The conversation last: each round's bytes extend the last round's.
        return "/api/chat", last_key(body, "messages")

    def parse_response(
        self, data: Mapping[str, Any], messages: Sequence[ChatMessage]
    ) -> CompletionResponse:
        message = data["message"]
        reply = StreamAccumulator(model=data.get("model"), raw_reason=data.get("done_reason"))
        reply.reason(ReasoningKind.THINKING, message.get("thinking"))
        reply.text(message.get("content"))
        for parts in function_calls(message.get("tool_calls"), CallIds(messages)):
            reply.call(*parts)
        return reply.response(self, *_ending(reply, data), raw=data)

    def parse_stream(
        self, response: httpx.Response, messages: Sequence[ChatMessage]
    ) -> Iterator[StreamEvent]:
        """Read NDJSON lines; the reply is complete at the line with ``"done": true``."""
        ids = CallIds(messages)
        # The last chunk (done) carries the model, the reason and the counts.
        reply = StreamAccumulator(usage={})
        done = False
        for chunk in iter_ndjson(self.lines(response)):
            if chunk.get("error"):
                raise self.stream_error(chunk)
            reply.chunk(chunk)
            message = chunk.get("message") or {}
            reply.reason(ReasoningKind.THINKING, message.get("thinking"))
            self.check_size(reply.reasoning_chars, "reasoning")
            if thought := reply.thought(message.get("thinking")):
                yield thought
            if text := reply.text(message.get("content")):
                yield text
            for parts in function_calls(message.get("tool_calls"), ids):
                yield reply.call(*parts)
            if chunk.get("done"):
                done = True
                reply.model, reply.raw_reason, reply.usage = (
                    chunk.get("model"),
                    chunk.get("done_reason"),
                    chunk,
                )
                break
        if not done:
            raise self.stream_ended_early('a line with "done": true')
        yield reply.finish(self, *_ending(reply, reply.usage))
