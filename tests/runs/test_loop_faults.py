"""Whatever fails once a turn is stored, the conversation stays valid and usable.

A scripted provider and scripted tools fail on a schedule (provider errors,
tools that raise, hang or return text no database stores, a database error
while results are stored, a cancel from inside a tool); after every schedule
the run has ended, every stored call has exactly one result, and the next run
on the same conversation completes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpx
import pytest
from django.db import OperationalError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ChatMessage, InvalidMessage, Role, ToolCall
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import ACTIVE_RUN_STATUSES, Run, RunStatus
from llm_conversations.providers import (
    AnthropicProvider,
    OpenAIProvider,
    Provider,
    ProviderUnavailableError,
)
from llm_conversations.runs import ToolLoopService, transitions
from llm_conversations.runs.run_columns import SERVER_ERROR
from llm_conversations.tools import Tool, ToolRegistry, tool

pytestmark = pytest.mark.django_db

# What one model round does, and what each tool call of a round does.
ROUNDS = st.sampled_from(["calls", "text", "provider_error"])
CALLS = st.sampled_from(["ok", "raises", "hangs", "nul", "surrogate"])


class ScriptedProvider(Provider):
    """Answers each model call from a script; no HTTP."""

    backend = "scripted"
    uses_http = False

    def __init__(self, script: Iterable[tuple[str, list[str]]]) -> None:
        super().__init__(model="scripted")
        self.script: Iterator[tuple[str, list[str]]] = iter(script)
        self.calls = 0

    def send(self, request: Any) -> CompletionResponse:
        tools = request.tools
        self.calls += 1
        kind, behaviours = next(self.script, ("text", []))
        if kind == "provider_error":
            raise ProviderUnavailableError("scripted: the provider is down", provider="scripted")
        if kind == "calls" and tools:
            calls = [
                ToolCall(f"c{self.calls}_{i}", behaviour, {})
                for i, behaviour in enumerate(behaviours)
            ]
            return CompletionResponse("", tuple(calls))
        return CompletionResponse(f"answer {self.calls}")


def registry() -> ToolRegistry:
    @tool(name="ok")
    def ok() -> str:
        return "fine"

    @tool(name="raises")
    def raises() -> str:
        raise RuntimeError("the tool broke")

    @tool(name="hangs", timeout=0.2)
    def hangs() -> str:
        time.sleep(1)
        return "too late"

    @tool(name="nul")
    def nul() -> str:
        return "a\x00b"

    @tool(name="surrogate")
    def surrogate() -> str:
        return "a\ud800b"

    return ToolRegistry([ok, raises, hangs, nul, surrogate])


def assert_valid_and_usable(conversation: Any, run: Run) -> None:
    assert run.status not in ACTIVE_RUN_STATUSES
    history = load_messages(conversation)
    # From an empty start, every call answered exactly once, in place.
    assert check_sequence(history) == ()
    calls = [c.id for m in history for c in m.tool_calls or ()]
    results = [m.tool_call_id for m in history if m.role is Role.TOOL]
    assert sorted(calls) == sorted(results)
    next_run = ToolLoopService(ScriptedProvider([]), tools=registry()).send(conversation, "again?")
    assert (next_run.status, next_run.termination_reason) == ("completed", "completed")


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    script=st.lists(st.tuples(ROUNDS, st.lists(CALLS, min_size=1, max_size=3)), max_size=4),
    store_fails_at=st.sampled_from([None, 0, 1]),
)
def test_every_fault_schedule_leaves_the_conversation_valid(
    script: list[tuple[str, list[str]]], store_fails_at: int | None, monkeypatch: Any
) -> None:
    stores = {"n": 0}
    real_store = transitions.store_results

    def failing_store(run: Run, results: list[ChatMessage], **kwargs: Any) -> Any:
        stores["n"] += 1
        if store_fails_at is not None and stores["n"] - 1 == store_fails_at:
            raise OperationalError("disk I/O error")
        return real_store(run, results, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(transitions, "store_results", failing_store)
        conversation = create_conversation()
        service = ToolLoopService(ScriptedProvider(script), tools=registry())
        run = service.send(conversation, "go", max_iterations=5)
    assert_valid_and_usable(conversation, run)
    if run.status == RunStatus.FAILED:
        # The scheduled faults, nothing else: the provider's or the database's.
        assert run.error_type in ("ProviderUnavailableError", "OperationalError")
        assert run.error_message  # a stable sentence, never empty
        assert "disk I/O" not in run.error_message  # database text stays in the log


def test_a_database_error_while_storing_results_answers_the_calls() -> None:
    conversation = create_conversation()
    real_store = transitions.store_results

    def failing_store(run: Run, results: list[ChatMessage], **kwargs: Any) -> Any:
        raise OperationalError("could not write: SELECT secret FROM table")

    transitions.store_results = failing_store  # type: ignore[assignment]
    try:
        run = ToolLoopService(ScriptedProvider([("calls", ["ok", "ok"])]), tools=registry()).send(
            conversation, "go"
        )
    finally:
        transitions.store_results = real_store  # type: ignore[assignment]
    assert (run.status, run.termination_reason, run.error_type) == (
        "failed",
        "error",
        "OperationalError",
    )
    assert run.error_message == SERVER_ERROR
    history = load_messages(conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool"]
    assert all(m.is_error and "failed before" in m.content for m in history[2:])
    assert_valid_and_usable(conversation, run)


def test_unstorable_tool_output_is_made_storable_and_flagged() -> None:
    conversation = create_conversation()
    run = ToolLoopService(
        ScriptedProvider([("calls", ["nul", "surrogate", "ok"])]), tools=registry()
    ).send(conversation, "go")
    assert run.status == "completed"
    results = list(conversation.messages.filter(role="tool").order_by("position"))
    assert [r.content for r in results] == ["a\ufffdb", "a\ufffdb", "fine"]
    assert [r.metadata for r in results] == [{"sanitized": True}, {"sanitized": True}, {}]


def test_a_slow_tool_is_answered_with_an_error_at_its_timeout() -> None:
    conversation = create_conversation()
    started = time.monotonic()
    run = ToolLoopService(ScriptedProvider([("calls", ["hangs", "ok"])]), tools=registry()).send(
        conversation, "go"
    )
    assert time.monotonic() - started < 0.9  # not the tool's full second
    results = list(conversation.messages.filter(role="tool").order_by("position"))
    assert [(r.is_error, r.content) for r in results] == [
        (True, "The tool did not answer within 0.2 seconds."),
        (False, "fine"),
    ]
    assert run.status == "completed"


def test_the_timeout_setting_applies_to_tools_without_their_own(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "TOOL_TIMEOUT": 0.1}

    def slow() -> str:
        time.sleep(0.5)
        return "late"

    tools = ToolRegistry([Tool.from_function(slow)])
    provider = ScriptedProvider([])
    provider.send = lambda request: (  # type: ignore[method-assign]
        CompletionResponse("", (ToolCall("s1", "slow"),))
        if not any(m.role is Role.TOOL for m in request.messages)
        else CompletionResponse("done")
    )
    conversation = create_conversation()
    ToolLoopService(provider, tools=tools).send(conversation, "go")
    (result,) = conversation.messages.filter(role="tool")
    assert (result.is_error, result.content) == (
        True,
        "The tool did not answer within 0.1 seconds.",
    )


def test_a_run_past_its_deadline_fails_with_its_calls_answered(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "RUN_TIMEOUT": 0.3}

    @tool(name="slow_ok")
    def slow_ok() -> str:
        time.sleep(0.4)
        return "done slowly"

    provider = ScriptedProvider([("calls", ["slow_ok"]), ("calls", ["slow_ok"])])
    conversation = create_conversation()
    run = ToolLoopService(provider, tools=ToolRegistry([slow_ok])).send(conversation, "go")
    assert (run.status, run.termination_reason, run.error_type) == (
        "failed",
        "timeout",
        "RunStateError",
    )
    assert "RUN_TIMEOUT" in run.error_message
    assert provider.calls == 1  # no model call after the deadline
    assert_valid_and_usable(conversation, run)


def test_an_invalid_call_of_a_client_side_tool_is_answered_not_handed_out() -> None:
    pick = Tool.client_side(
        "pick",
        "Let the user pick.",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    provider = ScriptedProvider([])
    provider.send = lambda request: (  # type: ignore[method-assign]
        CompletionResponse("", (ToolCall("p1", "pick", {"n": "many"}),))
        if not any(m.role is Role.TOOL for m in request.messages)
        else CompletionResponse("understood")
    )
    conversation = create_conversation()
    run = ToolLoopService(provider, tools=ToolRegistry([pick])).send(conversation, "go")
    assert (run.status, run.waiting_calls) == ("completed", [])
    (result,) = conversation.messages.filter(role="tool")
    assert result.is_error
    assert result.content.startswith("Invalid arguments for pick")


def _adapter_service(backend: str, replies: list[dict[str, Any]], bodies: list[Any]) -> Any:
    def transport(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=replies[min(len(bodies), len(replies)) - 1])

    client = httpx.Client(transport=httpx.MockTransport(transport))
    provider = (OpenAIProvider if backend == "openai" else AnthropicProvider)(
        model="m", api_key="sk-test", http_client=client, streams=False
    )
    return ToolLoopService(provider, tools=registry())


def _openai(content: str | None, finish: str) -> dict[str, Any]:
    return {
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3},
    }


def _anthropic(text: str | None, stop: str) -> dict[str, Any]:
    content = [{"type": "text", "text": text}] if text else []
    return {
        "model": "m",
        "content": content,
        "stop_reason": stop,
        "usage": {"input_tokens": 3, "output_tokens": 0},
    }


@pytest.mark.parametrize(
    ("backend", "reply", "reason"),
    [
        ("openai", _openai(None, "content_filter"), "content_filter"),
        ("openai", _openai("", "length"), "length"),
        ("openai", _openai("", "stop"), "completed"),
        ("anthropic", _anthropic(None, "refusal"), "content_filter"),
        ("anthropic", _anthropic(None, "max_tokens"), "length"),
        ("anthropic", _anthropic(None, "end_turn"), "completed"),
    ],
)
def test_an_empty_reply_is_stored_with_its_finish_reason_and_ends_the_run(
    backend: str, reply: dict[str, Any], reason: str
) -> None:
    bodies: list[Any] = []
    answer = _openai("Hello.", "stop") if backend == "openai" else _anthropic("Hello.", "end_turn")
    service = _adapter_service(backend, [reply, answer], bodies)
    conversation = create_conversation()
    run = service.send(conversation, "hi")
    assert (run.status, run.termination_reason) == ("completed", reason)
    empty = conversation.messages.get(role="assistant")
    assert (empty.content, empty.finish_reason) == ("", {"completed": "stop"}.get(reason, reason))
    # The next run works, and the empty turn is not sent to the model.
    assert service.send(conversation, "again").status == "completed"
    sent = bodies[-1]["messages"]
    assert all(m["role"] == "user" for m in sent)
    texts = [
        m["content"] if backend == "openai" else [b["text"] for b in m["content"]] for m in sent
    ]
    # Anthropic joins consecutive user turns into one message of two blocks.
    assert texts == (["hi", "again"] if backend == "openai" else [["hi", "again"]])
    assert load_messages(conversation)[-1] == ChatMessage.assistant("Hello.")


def test_a_reply_made_storable_by_the_adapter_is_flagged() -> None:
    bodies: list[Any] = []
    service = _adapter_service("openai", [_openai("bad \x00 byte", "stop")], bodies)
    conversation = create_conversation()
    assert service.send(conversation, "hi").status == "completed"
    reply = conversation.messages.get(role="assistant")
    assert (reply.content, reply.metadata) == ("bad \ufffd byte", {"sanitized": True})


@pytest.mark.parametrize(
    ("text", "code"), [("a\x00b", "invalid_text"), ("a\ud800b", "invalid_text")]
)
def test_a_user_turn_no_database_stores_is_refused_naming_the_field(text: str, code: str) -> None:
    conversation = create_conversation()
    with pytest.raises(InvalidMessage) as info:
        ToolLoopService(ScriptedProvider([]), tools=registry()).start(conversation, text)
    assert (info.value.code, info.value.field) == (code, "message.content")
    assert not Run.objects.filter(conversation=conversation).exists()
    assert load_messages(conversation) == []
