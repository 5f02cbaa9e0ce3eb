"""Anthropic Messages API (``POST /v1/messages``).

All conversion to Anthropic's format happens in :func:`to_anthropic_request`,
one step of the request per function; the turns are
:func:`~llm_conversations.providers.anthropic_messages.anthropic_turns`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from llm_conversations.core.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.parameters import ParameterSupport, RunParameters
from llm_conversations.core.structured import describes_object, map_subschemas
from llm_conversations.core.tool_specs import ToolSpec

from ._wire import (
    CallIds,
    check_supported_parts,
    int_or_zero,
    iter_sse,
    merge_fields,
    pass_through,
)
from .anthropic_messages import anthropic_turns
from .anthropic_thinking import BACKEND, fit_thinking, keep_thinking
from .base import CompletionRequest, Provider
from .caching import caching_on, last_key, place_breakpoints
from .stream import StreamAccumulator
from .stream_events import StreamEvent

__all__ = [
    "ANTHROPIC_VERSION",
    "BACKEND",
    "COMPACT_EDIT",
    "DEFAULT_MAX_TOKENS",
    "AnthropicProvider",
    "anthropic_parameters",
    "anthropic_schema",
    "anthropic_usage",
    "to_anthropic_request",
    "with_compaction",
]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
COMPACT_EDIT = "compact_20260112"
"""The ``context_management`` edit that asks for server-side compaction."""
COMPACT_BETA = "compact-2026-01-12"

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "refusal": FinishReason.CONTENT_FILTER,
}
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
_NONE = RunParameters()
# Constraints structured outputs refuse. As Anthropic's SDKs do, they move into
# the description; the answer is still validated against the schema as given.
_MOVED_CONSTRAINTS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "minProperties",
    "maxProperties",
)


def anthropic_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON Schema as structured outputs take it: every object closes
    ``additionalProperties`` unless it says otherwise, and the numeric, length
    and count constraints it refuses are moved into the ``description``."""

    def adapt(node: dict[str, Any]) -> dict[str, Any]:
        moved = {key: node.pop(key) for key in _MOVED_CONSTRAINTS if key in node}
        if isinstance(node.get("minItems"), int) and node["minItems"] > 1:
            moved["minItems"] = node.pop("minItems")
        if moved:
            note = ", ".join(f"{key}: {json.dumps(value)}" for key, value in moved.items())
            node["description"] = f"{node.get('description', '')}\n\n{{{note}}}".lstrip()
        if describes_object(node):
            node.setdefault("additionalProperties", False)
        return node

    adapted: dict[str, Any] = map_subschemas(dict(schema), adapt)
    return adapted


def anthropic_parameters(parameters: RunParameters) -> dict[str, Any]:
    """The Messages API fields of a run's parameters (those that are set).

    ``max_output_tokens`` is ``max_tokens``, ``stop`` ``stop_sequences``;
    ``reasoning_effort`` is ``output_config.effort`` and ``response_format``
    ``output_config.format`` (structured outputs, which work beside tools);
    ``parallel_tool_calls: false`` is ``tool_choice.disable_parallel_tool_use``.
    """
    fields: dict[str, Any] = {
        name: getattr(parameters, name)
        for name in ("temperature", "top_p")
        if getattr(parameters, name) is not None
    }
    if parameters.max_output_tokens is not None:
        fields["max_tokens"] = parameters.max_output_tokens
    if parameters.stop is not None:
        fields["stop_sequences"] = list(parameters.stop)
    output: dict[str, Any] = {}
    if parameters.reasoning_effort is not None:
        output["effort"] = parameters.reasoning_effort
    if parameters.response_format is not None:
        schema = anthropic_schema(parameters.response_format.schema)
        output["format"] = {"type": "json_schema", "schema": schema}
    if output:
        fields["output_config"] = output
    choice = parameters.tool_choice
    if choice is not None:
        fields["tool_choice"] = (
            {"type": "tool", "name": choice.name}
            if choice.mode == "tool"
            else dict(_TOOL_CHOICE[choice.mode])
        )
    if parameters.parallel_tool_calls is False:
        fields["tool_choice"] = {**fields.get("tool_choice", {}), "disable_parallel_tool_use": True}
    return fields


# Images and PDFs in user turns; images (and text) inside tool results.
SUPPORTED_PARTS = {
    "user": frozenset({"text", "image", "file"}),
    "tool": frozenset({"text", "image"}),
}


def to_anthropic_request(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    model: str,
    options: Mapping[str, Any],
    parameters: RunParameters | None = None,
) -> dict[str, Any]:
    """Build the Messages request body.

    System messages are joined into top-level ``system``; the other turns
    are ``messages`` (:func:`anthropic_turns`: content blocks, thinking sent
    back, ``tool_use`` and ``tool_result`` blocks, same-role turns merged).
    ``parameters`` (:func:`anthropic_parameters`) override what ``options`` set.
    Prompt caching (:func:`place_breakpoints`) is on unless the ``cache``
    option is ``false``; ``messages`` comes last, so the body of the next
    round extends this one's bytes.
    """
    check_supported_parts(messages, "anthropic", SUPPORTED_PARTS)
    options = dict(options)
    cache = caching_on(options)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": options.pop("max_tokens", DEFAULT_MAX_TOKENS),
        "messages": anthropic_turns(messages),
    }
    system = [m.content for m in messages if m.role is Role.SYSTEM]
    if system:
        body["system"] = "\n\n".join(system)
    if tools:
        body["tools"] = [_tool(spec) for spec in tools]
    body = pass_through(_entry_fields(body, options), options)
    body = fit_thinking(_run_fields(body, parameters or _NONE))
    # After fit_thinking: the rolling breakpoint goes on a block that is sent.
    return last_key(place_breakpoints(body) if cache else body, "messages")


def with_compaction(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` asking for compaction: the ``compact`` edit added to the
    ``context_management`` the entry's options gave (a trigger of its own, a
    ``clear_tool_uses`` edit), unless they name one already."""
    management = dict(body.get("context_management") or {})
    edits = list(management.get("edits") or ())
    if not any(isinstance(e, Mapping) and e.get("type") == COMPACT_EDIT for e in edits):
        edits.append({"type": COMPACT_EDIT})
    body["context_management"] = {**management, "edits": edits}
    return body


def _tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool offered, with its description when it has one."""
    if spec.description:
        return {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}
    return {"name": spec.name, "input_schema": spec.parameters}


def _entry_fields(body: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """``body`` with the entry's ``stop`` and ``tool_choice`` options in Anthropic's
    form, taken out of ``options`` (the rest pass through as they are)."""
    if "stop" in options:
        stop = options.pop("stop")
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    choice = options.pop("tool_choice", None)
    if choice is not None:
        body["tool_choice"] = (
            _TOOL_CHOICE.get(choice, choice) if isinstance(choice, str) else choice
        )
    return body


def _run_fields(body: dict[str, Any], parameters: RunParameters) -> dict[str, Any]:
    """``body`` with the run's parameters over the entry's options."""
    if parameters.tool_choice is not None:
        body.pop("tool_choice", None)  # the run's choice replaces the entry's
    body = merge_fields(body, anthropic_parameters(parameters))
    tool_choice = body.get("tool_choice")
    if isinstance(tool_choice, dict) and "disable_parallel_tool_use" in tool_choice:
        # Only a choice that allows calls can limit them to one.
        tool_choice.setdefault("type", "auto")
        if tool_choice["type"] == "none":
            del tool_choice["disable_parallel_tool_use"]
    return body


def anthropic_usage(data: object) -> Usage:
    """Input counts cache reads and writes too; ``cached`` is the cache reads,
    ``cache_write`` the writes (``cache_creation_input_tokens``).

    A reply that compacted reports each step in ``iterations`` (the compaction,
    then the message) and only the message's at the top: the usage is their sum,
    as all of them are billed."""
    if not isinstance(data, Mapping):
        return Usage()
    steps = data.get("iterations")
    if isinstance(steps, list) and steps and all(isinstance(s, Mapping) for s in steps):
        return sum((anthropic_usage({**step, "iterations": None}) for step in steps), Usage())
    read = data.get("cache_read_input_tokens")
    written = data.get("cache_creation_input_tokens")
    return Usage(
        input_tokens=sum(int_or_zero(data.get(key)) for key in _INPUT_KEYS),
        output_tokens=int_or_zero(data.get("output_tokens")),
        cached_tokens=read if isinstance(read, int) else None,
        cache_write_tokens=written if isinstance(written, int) else None,
    )


# Anthropic's input_tokens leaves out what was read from or written to the cache.
_INPUT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


# Stream deltas that carry pieces of one field of their block.
_DELTA_KEYS = {
    "input_json_delta": "partial_json",
    "thinking_delta": "thinking",
    "compaction_delta": "content",
}
_DELTA_WHAT = {
    "input_json_delta": "tool call arguments",
    "thinking_delta": "reasoning",
    "compaction_delta": "compaction",
}


def _finish(raw: object) -> FinishReason:
    return _FINISH.get(raw, FinishReason.OTHER) if isinstance(raw, str) else FinishReason.OTHER


class AnthropicProvider(Provider):
    """Claude models over the Messages API (``x-api-key``, ``anthropic-version``)."""

    backend = BACKEND
    default_base_url = "https://api.anthropic.com"
    compacts = True
    parameter_support = ParameterSupport(
        sampling=frozenset({"temperature", "top_p", "max_output_tokens", "stop"}),
        reasoning_efforts=frozenset({"low", "medium", "high", "xhigh", "max"}),
        tool_choices=frozenset({"auto", "none", "required", "tool"}),
        parallel_tool_calls=frozenset({True, False}),
        response_format=True,
        max_temperature=1.0,
    )

    def auth_headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        if self.compaction:
            headers["anthropic-beta"] = COMPACT_BETA
        return headers

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        body = to_anthropic_request(
            request.messages,
            request.tools,
            model=request.model,
            options=request.options,
            parameters=request.parameters,
        )
        if request.stream:
            body["stream"] = True
        if self.compaction:
            body = with_compaction(body)
        return "/v1/messages", last_key(body, "messages")

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
            else:
                keep_thinking(reply, block)
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
                raise self.stream_error(data)
            if kind == "message_start":
                message = data.get("message") or {}
                reply.keep(model=message.get("model"))
                reply.usage.update(message.get("usage") or {})
            elif kind == "content_block_start":
                block = dict(data["content_block"])
                block["partial"] = []
                block["size"] = 0
                blocks[data["index"]] = block
            elif kind == "content_block_delta":
                delta = data["delta"]
                if delta.get("type") == "text_delta":
                    if text := reply.text(delta.get("text")):
                        yield text
                elif delta.get("type") in _DELTA_KEYS:
                    # input_json_delta, thinking_delta: pieces of the block's one field.
                    block = blocks[data["index"]]
                    piece = delta.get(_DELTA_KEYS[delta["type"]]) or ""
                    block["partial"].append(piece)
                    block["size"] += len(piece)
                    self.check_size(block["size"], _DELTA_WHAT[delta["type"]])
                    if delta["type"] == "thinking_delta" and (thought := reply.thought(piece)):
                        yield thought
                elif delta.get("type") == "signature_delta":
                    block = blocks[data["index"]]
                    block["signature"] = (block.get("signature") or "") + (
                        delta.get("signature") or ""
                    )
            elif kind == "content_block_stop":
                block = blocks.pop(data["index"], {})
                joined = "".join(block.get("partial", ()))
                if block.get("type") == "tool_use":
                    yield reply.call(
                        ids.take(block.get("id")),
                        block["name"],
                        joined if joined else block.get("input"),
                    )
                elif block.get("type") in ("thinking", "compaction"):
                    key = "thinking" if block["type"] == "thinking" else "content"
                    keep_thinking(reply, {**block, key: (block.get(key) or "") + joined})
                else:
                    keep_thinking(reply, block)
            elif kind == "message_delta":
                reply.keep(raw_reason=(data.get("delta") or {}).get("stop_reason"))
                reply.usage.update(data.get("usage") or {})
            elif kind == "message_stop":
                stopped = True
                break
        if not stopped:
            raise self.stream_ended_early("message_stop")
        yield reply.finish(self, _finish(reply.raw_reason), anthropic_usage(reply.usage))
