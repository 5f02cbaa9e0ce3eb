"""OpenTelemetry: spans of runs, model calls and tool calls, and their metrics,
read back from the SDK's in-memory exporter and metric reader."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.test import override_settings
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from llm_conversations import telemetry
from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ChatMessage
from llm_conversations.models import Message, Run
from llm_conversations.providers import AnthropicProvider, EchoProvider, OpenAIProvider
from llm_conversations.runs import ToolLoopService
from llm_conversations.tools import ToolRegistry, tool
from tests.support import loop_tools

pytestmark = pytest.mark.django_db

SECRET = "sk-telemetry-secret"
PRICES = {"input": "1000", "cached_input": "100", "output": "3000"}
ECHO = {"echo": {"BACKEND": "echo", "MODEL": "echo"}}


class Recorded:
    """The in-memory exporter and metric reader behind the global providers."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        # Deltas: each read holds only what was recorded since the last one.
        self.reader = InMemoryMetricReader(
            preferred_temporality={
                Counter: AggregationTemporality.DELTA,
                Histogram: AggregationTemporality.DELTA,
            }
        )
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[self.reader]))

    def reset(self) -> None:
        self.exporter.clear()
        self.reader.get_metrics_data()

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def points(self) -> dict[str, list[Any]]:
        """Data points per metric name, of the instrumentation's own scope."""
        found: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                if scope.scope.name != telemetry.INSTRUMENTATION:
                    continue
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


_recorded: Recorded | None = None


@pytest.fixture
def otel() -> Recorded:
    """The global providers are set once per process (OpenTelemetry refuses a second)."""
    global _recorded
    if _recorded is None:
        _recorded = Recorded()
    _recorded.reset()
    return _recorded


def calls_text(*calls: tuple[str, str, dict[str, Any]]) -> str:
    return json.dumps(
        {
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ]
        }
    )


def send(text: str, provider: Any = None) -> Run:
    service = ToolLoopService(provider or EchoProvider(), tools=loop_tools.registry())
    return service.send(create_conversation(), ChatMessage.user(text))


def by_name(spans: list[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        named.setdefault(span.name, []).append(span)
    return named


def all_values(spans: list[ReadableSpan]) -> str:
    return json.dumps([dict(span.attributes or {}) for span in spans], default=str)


CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


def test_a_run_with_a_tool_round_makes_a_run_span_with_model_and_tool_children(
    otel: Recorded,
) -> None:
    run = send(calls_text(("call_w", "get_weather", {"city": "Paris"})))
    assert run.status == "completed"
    spans = by_name(otel.spans())
    assert sorted(spans) == ["chat echo", "execute_tool get_weather", "invoke_agent"]
    (root,) = spans["invoke_agent"]
    first, second = sorted(spans["chat echo"], key=lambda s: s.start_time or 0)
    (tool,) = spans["execute_tool get_weather"]
    assert root.parent is None
    for child in (first, second, tool):
        assert child.parent is not None
        assert child.parent.span_id == root.context.span_id
        assert child.context.trace_id == root.context.trace_id
    assert first.end_time is not None
    assert tool.start_time is not None
    assert first.end_time <= tool.start_time <= (second.start_time or 0)
    assert root.kind is SpanKind.INTERNAL
    assert first.kind is SpanKind.CLIENT
    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "echo",
        "gen_ai.request.model": "echo",
        "gen_ai.conversation.id": str(run.conversation_id),
        "llm_conversations.run.id": str(run.pk),
        "llm_conversations.run.attempt": 1,
        "llm_conversations.run.status": "completed",
        "llm_conversations.run.termination_reason": "completed",
        "llm_conversations.run.iterations": 2,
        "gen_ai.usage.input_tokens": run.input_tokens,
        "gen_ai.usage.output_tokens": run.output_tokens,
    }
    turns = list(Message.objects.filter(run=run, role="assistant").order_by("position"))
    for span, turn, finish in zip((first, second), turns, ("tool_calls", "stop"), strict=True):
        assert dict(span.attributes or {}) == {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "echo",
            "gen_ai.request.model": "echo",
            "gen_ai.request.stream": True,
            "gen_ai.response.model": "echo",
            "gen_ai.response.finish_reasons": (finish,),
            "gen_ai.usage.input_tokens": turn.input_tokens,
            "gen_ai.usage.output_tokens": turn.output_tokens,
        }
        assert span.status.status_code is StatusCode.UNSET
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_w",
        "gen_ai.tool.type": "function",
    }
    assert tool.status.status_code is StatusCode.UNSET


def test_content_is_left_out_by_default(otel: Recorded) -> None:
    send(calls_text(("call_w", "get_weather", {"city": "Reykjavik"})))
    spans = otel.spans()
    assert len(spans) == 4
    assert not CONTENT_KEYS & {key for span in spans for key in (span.attributes or {})}
    assert "Reykjavik" not in all_values(spans)


@override_settings(LLM_CONVERSATIONS={"PROVIDERS": ECHO, "TELEMETRY_CAPTURE_CONTENT": True})
def test_content_is_recorded_when_enabled(otel: Recorded) -> None:
    text = calls_text(("call_w", "get_weather", {"city": "Reykjavik"}))
    run = send(text)
    spans = by_name(otel.spans())
    first, second = sorted(spans["chat echo"], key=lambda s: s.start_time or 0)
    attributes = dict(first.attributes or {})
    assert json.loads(str(attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": text}]}
    ]
    assert json.loads(str(attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_w",
                    "name": "get_weather",
                    "arguments": {"city": "Reykjavik"},
                }
            ],
            "finish_reason": "tool_calls",
        }
    ]
    result = Message.objects.get(run=run, role="tool")
    sent = json.loads(str(dict(second.attributes or {})["gen_ai.input.messages"]))
    assert sent[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_w", "result": result.content}],
    }
    (tool,) = spans["execute_tool get_weather"]
    assert dict(tool.attributes or {})["gen_ai.tool.call.arguments"] == '{"city": "Reykjavik"}'
    assert dict(tool.attributes or {})["gen_ai.tool.call.result"] == result.content
    assert "gen_ai.input.messages" not in dict(spans["invoke_agent"][0].attributes or {})


def test_a_failing_tool_marks_its_span(otel: Recorded) -> None:
    send(calls_text(("call_f", "fail", {})))
    (tool,) = by_name(otel.spans())["execute_tool fail"]
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.status.description == "tool_error"
    assert dict(tool.attributes or {})["error.type"] == "tool_error"
    assert "disk on fire" not in all_values(otel.spans())


def test_parallel_calls_in_pool_threads_are_children_of_the_run(otel: Recorded) -> None:
    send(calls_text(("call_a", "get_weather", {"city": "Oslo"}), ("call_b", "get_time", {})))
    spans = by_name(otel.spans())
    (root,) = spans["invoke_agent"]
    tools = spans["execute_tool get_weather"] + spans["execute_tool get_time"]
    assert len(tools) == 2
    assert {t.parent.span_id for t in tools if t.parent} == {root.context.span_id}
    assert {dict(t.attributes or {})["gen_ai.tool.call.id"] for t in tools} == {"call_a", "call_b"}


def test_async_calls_on_the_shared_loop_are_children_of_the_run(otel: Recorded) -> None:
    @tool
    async def nap() -> str:
        await asyncio.sleep(0.05)
        return "rested"

    @tool(timeout=0.1)
    async def hang() -> str:
        await asyncio.sleep(30)
        return "too late"

    service = ToolLoopService(EchoProvider(), tools=ToolRegistry([nap, hang]))
    text = calls_text(("call_n", "nap", {}), ("call_h", "hang", {}))
    service.send(create_conversation(), ChatMessage.user(text))
    deadline = time.monotonic() + 2  # the cancelled call's span ends on the loop's thread
    while "execute_tool hang" not in by_name(otel.spans()) and time.monotonic() < deadline:
        time.sleep(0.01)
    spans = by_name(otel.spans())
    (root,) = spans["invoke_agent"]
    (napped,) = spans["execute_tool nap"]
    (cancelled,) = spans["execute_tool hang"]
    assert {t.parent.span_id for t in (napped, cancelled) if t.parent} == {root.context.span_id}
    assert napped.status.status_code is StatusCode.UNSET
    assert cancelled.status.status_code is StatusCode.ERROR
    assert dict(cancelled.attributes or {})["error.type"] == "asyncio.exceptions.CancelledError"


def failing_openai(status: int = 500) -> OpenAIProvider:
    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json={"error": {"message": f"overloaded {SECRET}"}})

    client = httpx.Client(transport=httpx.MockTransport(reply))
    return OpenAIProvider(
        model="gpt-4o",
        api_key=SECRET,
        http_client=client,
        max_retries=0,
        base_url="https://llm.example:8443/v1",
    )


def test_a_provider_failure_makes_error_spans(otel: Recorded) -> None:
    run = send("Hello", failing_openai())
    assert (run.status, run.termination_reason) == ("failed", "provider_error")
    spans = by_name(otel.spans())
    assert sorted(spans) == ["chat gpt-4o", "invoke_agent"]
    (call,) = spans["chat gpt-4o"]
    (root,) = spans["invoke_agent"]
    kind = "llm_conversations.exceptions.ProviderUnavailableError"
    for span in (call, root):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == kind
        assert dict(span.attributes or {})["error.type"] == kind
    assert dict(call.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.request.stream": True,
        "server.address": "llm.example",
        "server.port": 8443,
        "error.type": kind,
    }
    assert SECRET not in all_values(otel.spans())
    assert "overloaded" not in all_values(otel.spans())
    (duration,) = otel.points()["gen_ai.client.operation.duration"]
    assert dict(duration.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "server.address": "llm.example",
        "server.port": 8443,
        "error.type": kind,
    }
    assert duration.count == 1


@override_settings(
    LLM_CONVERSATIONS={
        "PROVIDERS": {
            "echo": {"BACKEND": "echo", "MODEL": "echo", "MODEL_INFO": {"echo": {"prices": PRICES}}}
        }
    }
)
def test_metrics_count_tokens_durations_and_cost(otel: Recorded) -> None:
    run = send(calls_text(("call_w", "get_weather", {"city": "Paris"})))
    points = otel.points()
    tokens = {
        dict(p.attributes)["gen_ai.token.type"]: p for p in points["gen_ai.client.token.usage"]
    }
    assert set(tokens) == {"input", "output"}
    assert (tokens["input"].count, tokens["input"].sum) == (2, run.input_tokens)
    assert (tokens["output"].count, tokens["output"].sum) == (2, run.output_tokens)
    assert dict(tokens["input"].attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "echo",
        "gen_ai.request.model": "echo",
        "gen_ai.response.model": "echo",
        "gen_ai.token.type": "input",
    }
    (duration,) = points["gen_ai.client.operation.duration"]
    assert duration.count == 2
    assert duration.sum > 0
    (cost,) = points[telemetry.COST_METRIC]
    assert run.cost > 0
    assert cost.value == pytest.approx(float(run.cost))
    assert cost.value == pytest.approx(
        float(sum(m.cost for m in Message.objects.filter(run=run, role="assistant")))
    )
    assert dict(cost.attributes) == {
        "gen_ai.provider.name": "echo",
        "gen_ai.response.model": "echo",
        "llm_conversations.provider": "echo",
    }


def test_a_model_without_prices_adds_no_cost(otel: Recorded) -> None:
    send("Hello")
    assert telemetry.COST_METRIC not in otel.points()


def test_a_streamed_call_spans_the_whole_stream(otel: Recorded) -> None:
    service = ToolLoopService(EchoProvider(), tools=loop_tools.registry())
    run = service.start(create_conversation(), "Hello there")
    events = service.events(run)
    first = next(events)
    # Between steps the run's span is not left active in the caller's context.
    assert not trace.get_current_span().get_span_context().is_valid
    list(events)
    spans = by_name(otel.spans())
    (call,) = spans["chat echo"]
    assert type(first).__name__ == "TextDelta"
    attributes = dict(call.attributes or {})
    assert attributes["gen_ai.request.stream"] is True
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert call.parent is not None
    assert call.parent.span_id == spans["invoke_agent"][0].context.span_id


def test_a_stream_closed_early_ends_its_spans_without_error(otel: Recorded) -> None:
    service = ToolLoopService(EchoProvider(), tools=loop_tools.registry())
    run = service.start(create_conversation(), "Hello there, a longer text to split")
    events = service.events(run)
    next(events)
    events.close()
    spans = by_name(otel.spans())
    assert sorted(spans) == ["chat echo", "invoke_agent"]
    assert all(s.status.status_code is StatusCode.UNSET for s in otel.spans())


def test_a_direct_provider_call_is_a_root_chat_span(otel: Recorded) -> None:
    response = EchoProvider().complete([ChatMessage.user("hi")])
    (span,) = otel.spans()
    assert span.name == "chat echo"
    assert span.parent is None
    assert dict(span.attributes or {})["gen_ai.usage.output_tokens"] == response.usage.output_tokens


def test_without_opentelemetry_nothing_is_recorded(
    otel: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    telemetry.otel.otel_api.cache_clear()
    try:
        assert not telemetry.enabled()
        assert telemetry.current_context() is None
        run = send(calls_text(("call_w", "get_weather", {"city": "Paris"})))
        assert run.status == "completed"
        telemetry.record_cost(
            Decimal("1"), entry="echo", response=EchoProvider().complete([ChatMessage.user("hi")])
        )
    finally:
        monkeypatch.undo()
        telemetry.otel.otel_api.cache_clear()
    assert otel.spans() == []
    assert otel.points() == {}
    assert telemetry.enabled()


def test_the_responses_backend_is_named_openai() -> None:
    assert telemetry.provider_name("openai_responses") == "openai"


def test_cache_and_reasoning_tokens_are_recorded_on_the_chat_span(otel: Recorded) -> None:
    reply = {
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hi."}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 10,
            "cache_read_input_tokens": 300,
            "cache_creation_input_tokens": 40,
            "output_tokens": 5,
        },
    }
    provider = AnthropicProvider(
        model="claude-sonnet-4-5",
        api_key="k",
        http_client=httpx.Client(
            transport=httpx.MockTransport(lambda request: httpx.Response(200, json=reply))
        ),
    )
    provider.complete([ChatMessage.user("hi")])
    (span,) = otel.spans()
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.usage.input_tokens"] == 350
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 300
    assert attributes["gen_ai.usage.cache_creation.input_tokens"] == 40
    assert "gen_ai.usage.reasoning.output_tokens" not in attributes  # not reported
