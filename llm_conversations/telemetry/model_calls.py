"""The spans and metrics of model calls: a ``chat {model}`` client span per call
(:func:`model_call`, :func:`traced_stream` for a stream), the token and
duration histograms, and the cost counter (:func:`record_cost`); message text
only with ``TELEMETRY_CAPTURE_CONTENT``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, TypeVar
from urllib.parse import urlsplit

from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ChatMessage, Role, ToolCall
from llm_conversations.telemetry.otel import (
    capture_content,
    entry_backend,
    error_type,
    instruments,
    mark_failed,
    otel_api,
    provider_name,
    tracer,
)

__all__ = ["ModelCall", "model_call", "record_cost", "traced_stream"]

T = TypeVar("T")


# Content, in the conventions' message forms (only with TELEMETRY_CAPTURE_CONTENT).


def _parts(content: str, tool_calls: Iterable[ToolCall] = ()) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "content": content}] if content else []
    for call in tool_calls:
        arguments = call.raw_arguments if call.malformed else call.arguments
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}
        )
    return parts


def _message_parts(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role is Role.TOOL:
        return [
            {"type": "tool_call_response", "id": message.tool_call_id, "result": message.content}
        ]
    return _parts(message.content, message.tool_calls or ())


def _messages_json(messages: Iterable[ChatMessage]) -> str:
    return json.dumps([{"role": m.role.value, "parts": _message_parts(m)} for m in messages])


# Model calls ---------------------------------------------------------------------------


class ModelCall:
    """The span and metrics of one model call; :meth:`response` records the reply."""

    def __init__(self, span: Any, attributes: dict[str, Any], started: float) -> None:
        self._span = span
        self._attributes = attributes
        self._started = started
        self._response: CompletionResponse | None = None

    def response(self, response: CompletionResponse) -> None:
        """Record the reply: response model, finish reason, usage (and text, if captured)."""
        self._response = response
        if self._span is None:
            return
        usage = response.usage
        values: dict[str, Any] = {
            "gen_ai.response.model": response.model,
            "gen_ai.response.finish_reasons": [response.finish_reason.value],
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
        }
        if usage.cached_tokens is not None:
            values["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
        if usage.cache_write_tokens is not None:
            values["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
        if usage.reasoning_tokens is not None:
            values["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
        reply_id = (response.raw or {}).get("id")
        if isinstance(reply_id, str):
            values["gen_ai.response.id"] = reply_id
        if capture_content():
            output = {
                "role": "assistant",
                "parts": _parts(response.content, response.tool_calls),
                "finish_reason": response.finish_reason.value,
            }
            values["gen_ai.output.messages"] = json.dumps([output])
        self._span.set_attributes(values)

    def _finish(self, failure: BaseException | None) -> None:
        api = otel_api()
        if api is None or self._span is None:
            return
        attributes = dict(self._attributes)
        if failure is not None:
            kind = error_type(failure)
            mark_failed(self._span, kind)
            attributes["error.type"] = kind
        recorded = instruments()
        if self._response is not None:
            attributes["gen_ai.response.model"] = self._response.model
            usage = self._response.usage
            for token_type, count in (
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
            ):
                recorded["tokens"].record(count, {**attributes, "gen_ai.token.type": token_type})
        recorded["duration"].record(time.monotonic() - self._started, attributes)
        self._span.end()


@contextmanager
def model_call(
    backend: str,
    model: str,
    messages: Sequence[ChatMessage],
    *,
    stream: bool,
    base_url: str = "",
    parameters: Any = None,
) -> Iterator[ModelCall]:
    """A ``chat {model}`` client span around one model call, child of the active span.

    The call's duration and (once :meth:`ModelCall.response` has it) its
    token usage are recorded as metrics; an exception marks the span failed
    with its ``error.type`` and is re-raised.
    """
    api = otel_api()
    if api is None:
        yield ModelCall(None, {}, 0.0)
        return
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name(backend),
        "gen_ai.request.model": model,
    }
    where = urlsplit(base_url) if base_url else None
    if where is not None and where.hostname:
        attributes["server.address"] = where.hostname
        if where.port:
            attributes["server.port"] = where.port
    span_attributes: dict[str, Any] = {**attributes, "gen_ai.request.stream": stream}
    for name, key in (
        ("temperature", "gen_ai.request.temperature"),
        ("top_p", "gen_ai.request.top_p"),
        ("max_output_tokens", "gen_ai.request.max_tokens"),
        ("seed", "gen_ai.request.seed"),
    ):
        value = getattr(parameters, name, None)
        if value is not None:
            span_attributes[key] = value
    if getattr(parameters, "response_format", None) is not None:
        span_attributes["gen_ai.output.type"] = "json"
    if capture_content():
        span_attributes["gen_ai.input.messages"] = _messages_json(messages)
    from opentelemetry.trace import SpanKind

    span = tracer(api).start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=span_attributes)
    call = ModelCall(span, attributes, time.monotonic())
    try:
        yield call
    except GeneratorExit:
        # The caller stopped reading a stream: not an error of the call.
        call._finish(None)
        raise
    except BaseException as exc:
        call._finish(exc)
        raise
    call._finish(None)


def traced_stream(
    call: Callable[[], Any],
    events: Callable[[], Iterator[T]],
    completed: Callable[[T], CompletionResponse | None],
) -> Iterator[T]:
    """``events()`` inside the span ``call()`` opens, which lasts until the stream
    ends; ``completed`` picks the reply out of the event that carries it."""
    with call() as traced:
        for event in events():
            response = completed(event)
            if response is not None:
                traced.response(response)
            yield event


# Cost ----------------------------------------------------------------------------------


def record_cost(cost: Decimal | None, *, entry: str, response: CompletionResponse) -> None:
    """Add a reply's dollars to the cost counter (a model without prices adds nothing).

    Counted when the run prices the reply, before storing it: a reply a cancel
    then discards was billed all the same."""
    if cost is None or otel_api() is None:
        return
    instruments()["cost"].add(
        float(cost),
        {
            "gen_ai.provider.name": provider_name(response.provider or entry_backend(entry)),
            "gen_ai.response.model": response.model,
            "llm_conversations.provider": entry,
        },
    )
