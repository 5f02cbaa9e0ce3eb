"""OpenTelemetry spans and metrics for runs, model calls and tool calls.

Names follow the OpenTelemetry GenAI semantic conventions: a run is an
``invoke_agent`` span, each model call a ``chat {model}`` client span under
it, each tool execution an ``execute_tool {tool}`` span under the run; model
calls record the ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.duration`` histograms, replies a run prices the
``llm_conversations.cost`` counter. Message text, tool arguments and results
are recorded only when ``TELEMETRY_CAPTURE_CONTENT`` is true.

``opentelemetry-api`` is optional (the ``otel`` extra): imported on first use,
and without it every function here does nothing. Spans and metrics go to the
global tracer and meter providers, which the host project sets up (the SDK,
an exporter, or ``opentelemetry-instrument``). See ``docs/telemetry.md``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from types import ModuleType
from typing import Any, TypeVar
from urllib.parse import urlsplit

from llm_conversations.conf import conf
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ChatMessage, Role, ToolCall

__all__ = [
    "COST_METRIC",
    "INSTRUMENTATION",
    "PROVIDER_NAMES",
    "ModelCall",
    "ToolExecution",
    "current_context",
    "enabled",
    "model_call",
    "provider_name",
    "record_cost",
    "tool_execution",
    "traced_run",
    "traced_stream",
]

INSTRUMENTATION = "llm_conversations"
"""The instrumentation scope of every span and metric."""
COST_METRIC = "llm_conversations.cost"
"""The counter of dollars replies cost (no GenAI convention names cost)."""
# gen_ai.provider.name per backend: the convention's well-known values where one exists.
PROVIDER_NAMES = {
    "openai": "openai",
    "openai_responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "ollama": "ollama",
    "echo": "echo",
}

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Api:
    context: ModuleType
    metrics: ModuleType
    trace: ModuleType


@cache
def _api() -> _Api | None:
    """The OpenTelemetry API modules, or ``None`` when the package is not installed."""
    try:
        from opentelemetry import context, metrics, trace
    except ImportError:
        return None
    return _Api(context, metrics, trace)


def enabled() -> bool:
    """Whether ``opentelemetry-api`` is installed (whether anything is recorded)."""
    return _api() is not None


@cache
def _instruments() -> dict[str, Any]:
    """The histograms and the counter, made once (the API's proxies follow a
    meter provider set later)."""
    api = _api()
    assert api is not None
    from llm_conversations import __version__

    meter = api.metrics.get_meter(INSTRUMENTATION, __version__)
    return {
        "tokens": meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
        ),
        "duration": meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration."
        ),
        "cost": meter.create_counter(
            COST_METRIC, unit="{USD}", description="Dollars the model replies of runs cost."
        ),
    }


def _tracer(api: _Api) -> Any:
    from llm_conversations import __version__

    return api.trace.get_tracer(INSTRUMENTATION, __version__)


def _capture() -> bool:
    return conf.TELEMETRY_CAPTURE_CONTENT


def provider_name(backend: str) -> str:
    """``gen_ai.provider.name`` of an adapter's backend (its own name when the
    convention has none)."""
    return PROVIDER_NAMES.get(backend, backend)


def _entry_backend(entry: str) -> str:
    """The backend of a ``PROVIDERS`` entry, or the entry's name."""
    settings = conf.PROVIDERS.get(entry)
    backend = settings.get("BACKEND") if isinstance(settings, Mapping) else None
    return backend if isinstance(backend, str) else entry


def error_type(exc: BaseException) -> str:
    """``error.type`` of an exception: its fully qualified class name."""
    kind = type(exc)
    return f"{kind.__module__}.{kind.__qualname__}"


def current_context() -> Any:
    """The active OpenTelemetry context, to parent spans made in other threads."""
    api = _api()
    return None if api is None else api.context.get_current()


def _fail(span: Any, kind: str) -> None:
    """Mark ``span`` failed. The description is the type alone: an exception's
    text may quote a model's or a tool's words."""
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))


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
        if _capture():
            output = {
                "role": "assistant",
                "parts": _parts(response.content, response.tool_calls),
                "finish_reason": response.finish_reason.value,
            }
            values["gen_ai.output.messages"] = json.dumps([output])
        self._span.set_attributes(values)

    def _finish(self, failure: BaseException | None) -> None:
        api = _api()
        if api is None or self._span is None:
            return
        attributes = dict(self._attributes)
        if failure is not None:
            kind = error_type(failure)
            _fail(self._span, kind)
            attributes["error.type"] = kind
        instruments = _instruments()
        if self._response is not None:
            attributes["gen_ai.response.model"] = self._response.model
            usage = self._response.usage
            for token_type, count in (
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
            ):
                instruments["tokens"].record(count, {**attributes, "gen_ai.token.type": token_type})
        instruments["duration"].record(time.monotonic() - self._started, attributes)
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
    api = _api()
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
    if _capture():
        span_attributes["gen_ai.input.messages"] = _messages_json(messages)
    from opentelemetry.trace import SpanKind

    span = _tracer(api).start_span(
        f"chat {model}", kind=SpanKind.CLIENT, attributes=span_attributes
    )
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


# Runs ----------------------------------------------------------------------------------


def traced_run(run: Any, steps: Iterator[T]) -> Generator[T, None, None]:
    """``steps`` (the rounds of one execution of ``run``) inside an ``invoke_agent`` span.

    The span is the active one only while a step runs, and is detached before
    each event is handed to the caller, so a caller that resumes the
    generator from another thread or context cannot leave it attached.
    Model calls made in a step are its children; tool executions name it
    through :func:`current_context`. At the end it records the run's status,
    reason and totals from the last event that carries the run.
    """
    api = _api()
    if api is None:
        yield from steps
        return
    backend = _entry_backend(run.provider or "")
    model = run.model
    requested = getattr(run.run_parameters, "model", None)
    span = _tracer(api).start_span(
        "invoke_agent",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": provider_name(backend),
            "gen_ai.request.model": requested or model,
            "gen_ai.conversation.id": str(run.conversation_id),
            "llm_conversations.run.id": str(run.pk),
            "llm_conversations.run.attempt": run.attempts,
        },
    )
    context = api.trace.set_span_in_context(span)
    last = run
    failure: BaseException | None = None
    try:
        while True:
            token = api.context.attach(context)
            try:
                item = next(steps)
            except StopIteration:
                return
            finally:
                api.context.detach(token)
            carried = getattr(item, "run", None)
            if carried is not None and getattr(carried, "pk", None) == run.pk:
                last = carried
            yield item
    except GeneratorExit:
        close = getattr(steps, "close", None)
        if close is not None:
            token = api.context.attach(context)
            try:
                close()
            finally:
                api.context.detach(token)
        raise
    except BaseException as exc:
        failure = exc
        raise
    finally:
        _end_run(span, last, failure)


def _end_run(span: Any, run: Any, failure: BaseException | None) -> None:
    span.set_attributes(
        {
            "llm_conversations.run.status": str(run.status),
            "llm_conversations.run.iterations": run.iterations,
            "gen_ai.usage.input_tokens": run.input_tokens,
            "gen_ai.usage.output_tokens": run.output_tokens,
        }
    )
    if run.termination_reason:
        span.set_attribute("llm_conversations.run.termination_reason", str(run.termination_reason))
    if failure is not None:
        _fail(span, error_type(failure))
    elif str(run.status) == "failed":
        _fail(span, str(run.termination_reason or "failed"))
    span.end()


# Tools ---------------------------------------------------------------------------------


class ToolExecution:
    """The span of one tool execution; :meth:`result` records the result and returns it."""

    def __init__(self, span: Any) -> None:
        self._span = span

    def result(self, message: ChatMessage) -> ChatMessage:
        """Record the tool's result (an error result marks the span failed)."""
        api = _api()
        if api is None or self._span is None:
            return message
        if _capture():
            self._span.set_attribute("gen_ai.tool.call.result", message.content)
        if message.is_error:
            _fail(self._span, "tool_error")
        return message


@contextmanager
def tool_execution(call: ToolCall, parent: Any = None) -> Iterator[ToolExecution]:
    """An ``execute_tool {name}`` span around one call; ``parent`` is the context
    of the run (from :func:`current_context`), since tools may run in pool threads."""
    api = _api()
    if api is None:
        yield ToolExecution(None)
        return
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
    }
    if _capture():
        attributes["gen_ai.tool.call.arguments"] = (
            call.raw_arguments if call.malformed else json.dumps(call.arguments)
        )
    span = _tracer(api).start_span(
        f"execute_tool {call.name}", context=parent, attributes=attributes
    )
    try:
        yield ToolExecution(span)
    except BaseException as exc:
        _fail(span, error_type(exc))
        raise
    finally:
        span.end()


# Cost ----------------------------------------------------------------------------------


def record_cost(cost: Decimal | None, *, entry: str, response: CompletionResponse) -> None:
    """Add a reply's dollars to the cost counter (a model without prices adds nothing).

    Counted when the run prices the reply, before storing it: a reply a cancel
    then discards was billed all the same."""
    if cost is None or _api() is None:
        return
    _instruments()["cost"].add(
        float(cost),
        {
            "gen_ai.provider.name": provider_name(response.provider or _entry_backend(entry)),
            "gen_ai.response.model": response.model,
            "llm_conversations.provider": entry,
        },
    )
