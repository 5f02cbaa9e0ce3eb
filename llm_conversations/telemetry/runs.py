"""The spans of runs and tool calls: an ``invoke_agent`` span per execution of a
run (:func:`traced_run`) and an ``execute_tool {tool}`` span per call under it
(:func:`tool_execution`); arguments and results only with
``TELEMETRY_CAPTURE_CONTENT``.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.telemetry.otel import (
    capture_content,
    entry_backend,
    error_type,
    mark_failed,
    otel_api,
    provider_name,
    tracer,
)

__all__ = ["ToolExecution", "tool_execution", "traced_run"]

T = TypeVar("T")


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
    api = otel_api()
    if api is None:
        yield from steps
        return
    backend = entry_backend(run.provider or "")
    model = run.model
    requested = getattr(run.run_parameters, "model", None)
    span = tracer(api).start_span(
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
        mark_failed(span, error_type(failure))
    elif str(run.status) == "failed":
        mark_failed(span, str(run.termination_reason or "failed"))
    span.end()


# Tools ---------------------------------------------------------------------------------


class ToolExecution:
    """The span of one tool execution; :meth:`result` records the result and returns it."""

    def __init__(self, span: Any) -> None:
        self._span = span

    def result(self, message: ChatMessage) -> ChatMessage:
        """Record the tool's result (an error result marks the span failed)."""
        api = otel_api()
        if api is None or self._span is None:
            return message
        if capture_content():
            self._span.set_attribute("gen_ai.tool.call.result", message.content)
        if message.is_error:
            mark_failed(self._span, "tool_error")
        return message


@contextmanager
def tool_execution(call: ToolCall, parent: Any = None) -> Iterator[ToolExecution]:
    """An ``execute_tool {name}`` span around one call; ``parent`` is the context
    of the run (from :func:`current_context`), since tools may run in pool threads."""
    api = otel_api()
    if api is None:
        yield ToolExecution(None)
        return
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
    }
    if capture_content():
        attributes["gen_ai.tool.call.arguments"] = (
            call.raw_arguments if call.malformed else json.dumps(call.arguments)
        )
    span = tracer(api).start_span(
        f"execute_tool {call.name}", context=parent, attributes=attributes
    )
    try:
        yield ToolExecution(span)
    except BaseException as exc:
        mark_failed(span, error_type(exc))
        raise
    finally:
        span.end()
