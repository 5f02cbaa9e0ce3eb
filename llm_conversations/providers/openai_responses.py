"""OpenAI's Responses API (``POST {base_url}/responses``), stateless.

Every request is sent with ``store: false`` and asks for
``include: ["reasoning.encrypted_content"]``: nothing is kept at OpenAI, so the
whole conversation goes out as input items each time, and a reasoning model's
state travels with it as the ``reasoning`` items it returned (their
``encrypted_content``). Those items are stored with the turn, each as one
``encrypted`` reasoning part whose data is the item as OpenAI sent it (``id``,
``encrypted_content``, ``summary``), beside ``summary`` parts holding its
summary text; they go back verbatim, ahead of the turn's message and
``function_call`` items, to this backend only (docs/providers.md, "Reasoning").
The items that followed a reasoning item keep their ids (``signature`` parts)
and go back with them, as OpenAI's stateless examples send a response's output.

Tool calls are ``function_call`` items and their results
``function_call_output`` items, paired by ``call_id``. Images are
``input_image`` parts with data URLs, PDFs ``input_file`` parts with
``file_data``, in user turns and tool results alike.

With the ``compact`` context strategy the request asks for server-side
compaction (``context_management: [{"type": "compaction"}]``, beside the
entry's own entries such as a ``compact_threshold``); the ``compaction`` item a
reply ends with is stored as one ``compaction`` part whose data is the item as
OpenAI sent it (``id``, ``encrypted_content``) and goes back after that turn's
items, to this backend only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from llm_conversations.core.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.parameters import ParameterSupport, RunParameters
from llm_conversations.core.reasoning import ReasoningKind

from ._wire import CallIds, int_or_zero, iter_sse, merge_fields
from .base import CompletionRequest, Provider
from .caching import caching_on, last_key, prefix_key
from .openai_responses_items import (
    BACKEND,
    SUPPORTED_PARTS,
    input_part,
    reasoning_items,
    to_responses_input,
)
from .stream import StreamAccumulator
from .stream_events import StreamEvent

__all__ = [
    "BACKEND",
    "SUPPORTED_PARTS",
    "OpenAIResponsesProvider",
    "input_part",
    "reasoning_items",
    "responses_finish_reason",
    "responses_parameters",
    "responses_usage",
    "to_responses_input",
    "with_compaction",
]

ENCRYPTED_REASONING = "reasoning.encrypted_content"
# The keys of a reasoning item that are sent back (``status`` is output only).
_REASONING_KEYS = ("id", "encrypted_content", "summary")
_COMPACTION_KEYS = ("id", "encrypted_content")
_COMPACTION_ENTRY = {"type": "compaction"}
# The ``context_management`` entry that asks for server-side compaction.

# incomplete_details.reason, by the finish reason it is.
_INCOMPLETE = {
    "max_output_tokens": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def responses_parameters(parameters: RunParameters) -> dict[str, Any]:
    """The Responses fields of a run's parameters (those that are set).

    ``reasoning_effort`` is ``reasoning.effort``; ``response_format`` is
    ``text.format`` (a ``json_schema`` format); a named tool choice is
    ``{"type": "function", "name": ...}``.
    """
    fields: dict[str, Any] = {
        name: getattr(parameters, name)
        for name in ("temperature", "top_p", "max_output_tokens", "parallel_tool_calls")
        if getattr(parameters, name) is not None
    }
    if parameters.reasoning_effort is not None:
        fields["reasoning"] = {"effort": parameters.reasoning_effort}
    choice = parameters.tool_choice
    if choice is not None:
        fields["tool_choice"] = (
            {"type": "function", "name": choice.name} if choice.mode == "tool" else choice.mode
        )
    response_format = parameters.response_format
    if response_format is not None:
        fields["text"] = {
            "format": {
                "type": "json_schema",
                "name": response_format.name,
                "schema": response_format.schema,
                "strict": response_format.strict,
            }
        }
    return fields


def responses_usage(data: object) -> Usage:
    """Read ``usage``: ``input_tokens_details.cached_tokens`` and
    ``output_tokens_details.reasoning_tokens`` when reported."""
    if not isinstance(data, Mapping):
        return Usage()
    input_details = data.get("input_tokens_details")
    output_details = data.get("output_tokens_details")
    cached = input_details.get("cached_tokens") if isinstance(input_details, Mapping) else None
    reasoning = (
        output_details.get("reasoning_tokens") if isinstance(output_details, Mapping) else None
    )
    total = data.get("total_tokens")
    return Usage(
        input_tokens=int_or_zero(data.get("input_tokens")),
        output_tokens=int_or_zero(data.get("output_tokens")),
        total_tokens=total if isinstance(total, int) else None,
        cached_tokens=cached if isinstance(cached, int) else None,
        reasoning_tokens=reasoning if isinstance(reasoning, int) else None,
    )


def responses_finish_reason(response: Mapping[str, Any]) -> str:
    """The provider's word for why a response ended: the ``incomplete_details``
    reason of an incomplete one, else its ``status``."""
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, Mapping) else None
    if isinstance(reason, str) and reason:
        return reason
    status = response.get("status")
    return status if isinstance(status, str) else "completed"


def _finish(raw: str, has_calls: bool, refused: bool) -> FinishReason:
    if raw in _INCOMPLETE:
        return _INCOMPLETE[raw]
    if raw != "completed":
        return FinishReason.OTHER
    if refused:
        return FinishReason.CONTENT_FILTER
    return FinishReason.TOOL_CALLS if has_calls else FinishReason.STOP


class _Reply(StreamAccumulator):
    """A reply being read, and whether the model refused (a ``refusal`` part)."""

    refused = False
    # Whether a reasoning item came: the items after it then keep their ids.
    reasoned = False

    def item(self, item: Mapping[str, Any], ids: CallIds, *, text: bool) -> list[StreamEvent]:
        """Add one output item; ``text`` is false when its text already streamed.

        Returns the events it makes: its text (when ``text``) and its call. After a
        reasoning item, the ``id`` of each message and call item is kept as a
        ``signature`` part (a call's by its call id), so the items go back
        as they came, paired with the reasoning that preceded them.
        """
        kind = item.get("type")
        events: list[StreamEvent] = []
        if kind == "message":
            for part in item.get("content") or ():
                if part.get("type") == "refusal":
                    self.refused = True
                piece = part.get("refusal") if part.get("type") == "refusal" else None
                if part.get("type") == "output_text":
                    piece = part.get("text")
                if text and (delta := self.text(piece)):
                    events.append(delta)
            if self.reasoned:
                self.reason(ReasoningKind.SIGNATURE, data=item.get("id"))
        elif kind == "function_call":
            event = self.call(ids.take(item.get("call_id")), item["name"], item.get("arguments"))
            events.append(event)
            if self.reasoned:
                self.reason(
                    ReasoningKind.SIGNATURE, data=item.get("id"), call_id=event.tool_call.id
                )
        elif kind == "reasoning":
            for summary in item.get("summary") or ():
                self.reason(ReasoningKind.SUMMARY, summary.get("text"))
            if item.get("encrypted_content"):
                self.reasoned = True
                kept = {key: item[key] for key in _REASONING_KEYS if key in item}
                self.reason(ReasoningKind.ENCRYPTED, data=json.dumps(kept))
        elif kind == "compaction" and item.get("encrypted_content"):
            kept = {key: item[key] for key in _COMPACTION_KEYS if key in item}
            self.reason(ReasoningKind.COMPACTION, data=json.dumps(kept))
        return events


def with_compaction(management: object) -> list[Any]:
    """The entry's ``context_management`` entries (a ``compact_threshold`` of its
    own) with the compaction entry added unless they hold one."""
    entries = list(management) if isinstance(management, list) else []
    if not any(isinstance(e, Mapping) and e.get("type") == "compaction" for e in entries):
        entries.append(dict(_COMPACTION_ENTRY))
    return entries


class OpenAIResponsesProvider(Provider):
    """OpenAI models over the Responses API, with a Bearer key and ``store: false``."""

    backend = BACKEND
    default_base_url = "https://api.openai.com/v1"
    compacts = True
    parameter_support = ParameterSupport(
        sampling=frozenset({"temperature", "top_p", "max_output_tokens"}),
        reasoning_efforts=frozenset({"none", "minimal", "low", "medium", "high", "xhigh"}),
        tool_choices=frozenset({"auto", "none", "required", "tool"}),
        parallel_tool_calls=frozenset({True, False}),
        response_format=True,
    )

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        instructions, items = to_responses_input(request.messages)
        options = dict(request.options)
        cache = caching_on(options)
        extra = options.pop("include", None) or ()
        include = [extra] if isinstance(extra, str) else [str(value) for value in extra]
        body: dict[str, Any] = {"model": request.model}
        if instructions:
            body["instructions"] = instructions
        body["input"] = items
        if request.tools:
            body["tools"] = [
                {"type": "function", **spec.to_wire()["function"]} for spec in request.tools
            ]
        # Stateless unless the entry says otherwise; the reasoning comes back encrypted.
        body["store"] = options.pop("store", False)
        if ENCRYPTED_REASONING not in include:
            include.append(ENCRYPTED_REASONING)
        body["include"] = include
        if cache and self.base_url == self.default_base_url:
            # OpenAI's own API only: a compatible server may refuse the unknown field.
            body["prompt_cache_key"] = options.pop("prompt_cache_key", None) or prefix_key(
                request.messages
            )
        for key, value in options.items():
            body.setdefault(key, value)
        if request.parameters.tool_choice is not None:
            body.pop("tool_choice", None)  # the run's choice replaces the entry's, never mixes
        body = merge_fields(body, responses_parameters(request.parameters))
        if request.stream:
            body["stream"] = True
        if self.compaction:
            body["context_management"] = with_compaction(body.get("context_management"))
        # The conversation last: each round's bytes extend the last round's.
        return "/responses", last_key(body, "input")

    def parse_response(
        self, data: Mapping[str, Any], messages: Sequence[ChatMessage]
    ) -> CompletionResponse:
        if data.get("status") == "failed":
            raise self._failed(data)
        ids = CallIds(messages)
        reply = _Reply(model=data.get("model"))
        for item in data["output"]:
            reply.item(item, ids, text=True)
        return reply.response(self, *self._ending(reply, data), raw=data)

    def parse_stream(
        self, response: httpx.Response, messages: Sequence[ChatMessage]
    ) -> Iterator[StreamEvent]:
        """Read the Responses events.

        Text arrives as ``response.output_text.delta`` (and ``refusal.delta``);
        each call, reasoning item and message is complete at its
        ``response.output_item.done``, and an item of the final response that
        had none is read from there (its text yielded then, unless it
        streamed). The reply is complete at
        ``response.completed`` or ``response.incomplete``; ``response.failed``
        and ``error`` raise the error they carry, and a stream closed before
        any of them ended early.
        """
        ids = CallIds(messages)
        reply = _Reply(raw_key="events")
        # Arguments streamed so far per output index, for the size check.
        arguments: dict[int, int] = {}
        summary_chars = 0
        # The output indexes whose text streamed, and those whose item is done.
        streamed: set[object] = set()
        done: set[object] = set()
        final: Mapping[str, Any] | None = None
        for sse in iter_sse(self.lines(response)):
            data = json.loads(sse.data)
            kind = data.get("type", sse.event)
            reply.chunk(data)
            if kind == "error":
                raise self.stream_error(_error_envelope(data))
            if kind == "response.failed":
                raise self._failed(data.get("response") or {})
            if kind in ("response.created", "response.in_progress"):
                reply.keep(model=(data.get("response") or {}).get("model"))
            elif kind in ("response.output_text.delta", "response.refusal.delta"):
                streamed.add(data.get("output_index"))
                if text := reply.text(data.get("delta")):
                    yield text
            elif kind == "response.function_call_arguments.delta":
                index = data.get("output_index", 0)
                arguments[index] = arguments.get(index, 0) + len(data.get("delta") or "")
                self.check_size(arguments[index], "tool call arguments")
            elif kind == "response.reasoning_summary_text.delta":
                summary_chars += len(data.get("delta") or "")
                self.check_size(summary_chars, "reasoning")
                if thought := reply.thought(data.get("delta")):
                    yield thought
            elif kind == "response.output_item.done":
                index = data.get("output_index")
                done.add(index)
                yield from reply.item(data["item"], ids, text=index not in streamed)
            elif kind in ("response.completed", "response.incomplete"):
                final = data["response"]
                break
        if final is None:
            raise self.stream_ended_early("response.completed")
        for index, item in enumerate(final.get("output") or ()):
            if index not in done:
                yield from reply.item(item, ids, text=index not in streamed)
        yield reply.finish(self, *self._ending(reply, final))

    @staticmethod
    def _ending(reply: _Reply, data: Mapping[str, Any]) -> tuple[FinishReason, Usage]:
        """The finish reason and usage of the final response object ``data``."""
        reply.keep(model=data.get("model"), raw_reason=responses_finish_reason(data))
        finish = _finish(reply.raw_reason or "", reply.has_calls, reply.refused)
        return finish, responses_usage(data.get("usage"))

    def _failed(self, response: Mapping[str, Any]) -> Exception:
        """The error of a ``failed`` response (its ``error`` holds ``code`` and ``message``)."""
        error = response.get("error")
        return self.stream_error(_error_envelope(error if isinstance(error, Mapping) else {}))


def _error_envelope(data: Mapping[str, Any]) -> dict[str, Any]:
    """An error as ``stream_error`` reads it: ``{"error": {"type", "code", "message"}}``.

    The ``error`` event carries ``code`` and ``message`` at its top level (or an
    ``error`` object); a failed response's ``error`` has ``code`` and ``message``.
    """
    nested = data.get("error")
    if isinstance(nested, Mapping):
        return {"error": dict(nested)}
    code = data.get("code")
    return {
        "error": {
            "type": code if isinstance(code, str) else None,
            "code": code,
            "message": data.get("message"),
        }
    }
