"""The tool loop through the echo backend and a real adapter at the HTTP boundary."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from llm_conversations.conversations import (
    append_completion,
    append_messages,
    create_conversation,
    load_messages,
)
from llm_conversations.core.completions import CompletionResponse, Usage
from llm_conversations.core.messages import ChatMessage, Role, ToolCall
from llm_conversations.exceptions import ConversationBusy, RunStateError
from llm_conversations.models import Message, Run, RunEvent, RunEventType, RunStatus
from llm_conversations.providers import EchoProvider, OpenAIProvider
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.events import (
    MessageStored,
    RunCompleted,
    RunRequiresAction,
    TextDelta,
    ToolCallStarted,
    ToolResultStored,
    log_type,
)
from llm_conversations.signals import message_appended, run_finished
from tests.conftest import requires_postgresql, run_together
from tests.support import loop_tools

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_gauge() -> None:
    loop_tools.gauge = loop_tools.Gauge()


def calls_text(*calls: tuple[str, str, dict[str, Any]]) -> str:
    """A user message that makes the echo backend call these tools."""
    return json.dumps(
        {
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ]
        }
    )


def echo_service() -> ToolLoopService:
    return ToolLoopService(EchoProvider(), tools=loop_tools.registry())


def test_echo_round_trip_with_parallel_calls_stores_every_turn() -> None:
    conversation = create_conversation()
    text = calls_text(("c1", "get_weather", {"city": "Paris"}), ("c2", "get_time", {}))
    run = echo_service().send(conversation, ChatMessage.user(text))
    assert (run.status, run.termination_reason, run.iterations) == ("completed", "completed", 2)
    history = load_messages(conversation)
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [m.tool_call_id for m in history[2:4]] == ["c1", "c2"]  # call order
    assert json.loads(history[2].content) == {"city": "Paris", "temperature": 18}
    assert "09:00" in history[4].content
    assert set(Message.objects.values_list("run", flat=True)) == {run.pk}
    assert run.total_tokens > 0
    assert run.total_tokens == sum(
        Message.objects.filter(role="assistant").values_list("total_tokens", flat=True)
    )
    assert run.offered_tool_names == loop_tools.registry().names()


def test_parallel_calls_are_in_flight_at_once() -> None:
    conversation = create_conversation()
    text = calls_text(
        ("a", "get_weather", {"city": "Paris"}),
        ("b", "get_weather", {"city": "Rome"}),
        ("c", "get_time", {}),
    )
    echo_service().send(conversation, ChatMessage.user(text))
    assert len(loop_tools.gauge.calls) == 3
    assert loop_tools.gauge.peak >= 2


@override_settings(LLM_CONVERSATIONS={"TOOL_WORKERS": 1})
def test_tool_workers_bounds_the_pool() -> None:
    text = calls_text(("a", "get_weather", {"city": "Paris"}), ("b", "get_time", {}))
    echo_service().send(create_conversation(), ChatMessage.user(text))
    assert loop_tools.gauge.peak == 1


def test_errors_unknown_tools_and_bad_arguments_are_answered() -> None:
    conversation = create_conversation()
    text = calls_text(
        ("a", "fail", {}),
        ("b", "nope", {}),
        ("c", "get_weather", {"town": "Paris"}),
        ("d", "get_weather", '{"city": '),
    )
    run = echo_service().send(conversation, ChatMessage.user(text))
    assert run.status == "completed"
    results = {m.tool_call_id: m for m in load_messages(conversation) if m.role is Role.TOOL}
    assert all(m.is_error for m in results.values())
    assert results["a"].content == "RuntimeError: disk on fire"
    assert "get_weather" in results["b"].content  # names the available tools
    assert "city" in results["c"].content
    assert "malformed" in results["d"].content.lower() or "json" in results["d"].content.lower()
    assert loop_tools.gauge.calls == []


def test_events_stream_in_order() -> None:
    conversation = create_conversation()
    service = echo_service()
    run = service.start(conversation, ChatMessage.user(calls_text(("a", "get_time", {}))))
    kinds = [type(event).__name__ for event in service.events(run.pk)]
    assert kinds[-1] == "RunCompleted"
    assert (
        kinds.index("MessageStored")
        < kinds.index("ToolCallStarted")
        < kinds.index("ToolResultStored")
    )
    assert kinds.count("MessageStored") == 2
    assert "TextDelta" in kinds
    deltas = "".join(e.text for e in service.events(run.pk) if isinstance(e, TextDelta))
    assert deltas == ""  # a finished run yields nothing


def test_the_loop_and_the_log_speak_the_same_event_types() -> None:
    conversation = create_conversation()
    service = echo_service()
    run = service.start(conversation, ChatMessage.user(calls_text(("a", "get_time", {}))))
    yielded = [log_type(event) for event in service.events(run.pk)]
    logged = [
        RunEventType(kind)
        for kind in RunEvent.objects.filter(run=run).values_list("type", flat=True)
        # Only the log knows when a worker claimed the run.
        if kind != RunEventType.RUN_RUNNING
    ]

    def collapsed(types: list[RunEventType]) -> list[RunEventType]:
        # The log buffers text deltas (TEXT_FLUSH_CHARS), the loop yields each one.
        return [t for i, t in enumerate(types) if i == 0 or t != types[i - 1]]

    assert collapsed(yielded) == collapsed(logged)
    assert yielded[-1] is RunEventType.RUN_COMPLETED
    assert RunEventType.TOOL_RESULT_STORED in yielded


def test_stream_text_matches_the_stored_reply() -> None:
    conversation = create_conversation()
    service = echo_service()
    run = service.start(conversation, ChatMessage.user("hello there"))
    events = list(service.events(run.pk))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    stored = [e.message for e in events if isinstance(e, MessageStored)]
    assert text == stored[0].content == "hello there"
    assert isinstance(events[-1], RunCompleted)


# Through a real adapter at the HTTP boundary ---------------------------------


def openai_reply(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def openai_service(
    handler: Callable[[dict[str, Any]], dict[str, Any]], bodies: list[dict[str, Any]]
) -> ToolLoopService:
    def transport(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        return httpx.Response(200, json=handler(body))

    provider = OpenAIProvider(
        model="gpt-test",
        api_key="sk-test",
        http_client=httpx.Client(transport=httpx.MockTransport(transport)),
        streams=False,  # the transport answers whole replies
    )
    return ToolLoopService(provider, tools=loop_tools.registry())


def test_multi_round_loop_through_the_openai_adapter() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        rounds = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if rounds < 2:
            call = {
                "id": f"call_{rounds}",
                "type": "function",
                "function": {"name": "get_time", "arguments": ""},
            }
            return openai_reply(
                {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
            )
        return openai_reply({"role": "assistant", "content": "It is 09:00."}, "stop")

    conversation = create_conversation(messages=[ChatMessage.system("Be brief.")])
    run = openai_service(handler, bodies).send(conversation, {"role": "user", "content": "Time?"})
    assert (run.status, run.iterations, run.total_tokens, run.provider) == (
        "completed",
        3,
        45,
        "openai",
    )
    assert len(bodies) == 3
    assert bodies[2]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Time?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "content": "09:00", "tool_call_id": "call_0"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "content": "09:00", "tool_call_id": "call_1"},
    ]
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == loop_tools.registry().names()
    assert load_messages(conversation)[-1] == ChatMessage.assistant("It is 09:00.")


def test_max_iterations_counts_every_model_call_and_the_last_has_no_tools() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        if "tools" not in body:
            return openai_reply({"role": "assistant", "content": "Giving up: it is 09:00."}, "stop")
        n = len(bodies)
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "get_time", "arguments": "{}"},
        }
        return openai_reply(
            {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        )

    run = openai_service(handler, bodies).send(
        create_conversation(), ChatMessage.user("loop"), max_iterations=3
    )
    # Three model calls, no more: the third is offered no tools.
    assert (run.status, run.termination_reason, run.iterations) == (
        "completed",
        "max_iterations",
        3,
    )
    assert ["tools" in b for b in bodies] == [True, True, False]
    assert load_messages(run.conversation_id)[-1] == ChatMessage.assistant(
        "Giving up: it is 09:00."
    )


def test_a_single_allowed_call_that_needs_no_tools_completes() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        return openai_reply({"role": "assistant", "content": "Hello."}, "stop")

    run = openai_service(handler, bodies).send(
        create_conversation(), ChatMessage.user("hi"), max_iterations=1
    )
    assert (run.status, run.termination_reason, run.iterations) == ("completed", "completed", 1)
    assert ["tools" in b for b in bodies] == [False]


def test_max_iterations_above_the_limit_is_refused() -> None:
    with pytest.raises(RunStateError) as info:
        echo_service().start(create_conversation(), ChatMessage.user("x"), max_iterations=1000)
    assert info.value.code == "invalid_max_iterations"
    assert not Run.objects.exists()


def test_provider_failure_fails_the_run_and_keeps_the_conversation_valid() -> None:
    def transport(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            401, json={"error": {"message": "Incorrect API key provided: sk-secret"}}
        )

    provider = OpenAIProvider(
        model="gpt-test",
        api_key="sk-secret",
        http_client=httpx.Client(transport=httpx.MockTransport(transport)),
        streams=False,  # the transport answers whole replies
    )
    conversation = create_conversation()
    run = ToolLoopService(provider, tools=loop_tools.registry()).send(
        conversation, ChatMessage.user("hi")
    )
    assert (run.status, run.termination_reason, run.error_type) == (
        "failed",
        "provider_error",
        "AuthenticationError",
    )
    assert "sk-secret" not in run.error_message
    assert load_messages(conversation) == [ChatMessage.user("hi")]
    # The conversation takes a new run right away.
    assert echo_service().send(conversation, ChatMessage.user("again")).status == "completed"


# Approval, denial, client-side tools -------------------------------------------


def test_approval_pauses_before_any_call_of_the_turn_and_resumes() -> None:
    conversation = create_conversation()
    service = echo_service()
    text = calls_text(("t", "get_time", {}), ("d", "delete_file", {"path": "/tmp/x"}))
    run = service.send(conversation, ChatMessage.user(text))
    assert run.status == "requires_action"
    assert [(p.call.id, p.reason) for p in run.waiting_calls] == [("d", "requires_approval")]
    assert loop_tools.gauge.calls == []  # not even the harmless call ran
    run = service.approve(run.pk)
    assert run.status == "completed"
    assert sorted(loop_tools.gauge.calls) == ["delete_file:/tmp/x", "get_time"]
    assert [m.content for m in load_messages(conversation) if m.role is Role.TOOL] == [
        "09:00",
        "deleted /tmp/x",
    ]


def test_deny_answers_with_an_error_result() -> None:
    conversation = create_conversation()
    service = echo_service()
    run = service.send(
        conversation, ChatMessage.user(calls_text(("d", "delete_file", {"path": "/"})))
    )
    run = service.deny(run.pk, ["d"])
    assert run.status == "completed"
    result = next(m for m in load_messages(conversation) if m.role is Role.TOOL)
    assert result == ChatMessage.tool_result(
        "d", "The operator denied this tool call.", is_error=True
    )
    assert loop_tools.gauge.calls == []


def test_approve_unknown_call_or_finished_run_is_refused() -> None:
    service = echo_service()
    run = service.send(
        create_conversation(), ChatMessage.user(calls_text(("d", "delete_file", {"path": "/"})))
    )
    with pytest.raises(RunStateError) as info:
        service.approve(run.pk, ["zzz"])
    assert info.value.code == "unknown_tool_call"
    service.approve(run.pk)
    with pytest.raises(RunStateError) as info:
        service.approve(run.pk)
    assert info.value.code == "run_not_waiting"


def test_client_side_tool_waits_for_submitted_outputs() -> None:
    conversation = create_conversation()
    service = echo_service()
    run = service.send(
        conversation, ChatMessage.user(calls_text(("p", "pick_color", {"prompt": "Pick"})))
    )
    assert run.status == "requires_action"
    assert run.waiting_calls[0].reason == "client_side"
    with pytest.raises(RunStateError):
        service.submit_tool_outputs(run.pk, {"other": "x"})
    run = service.submit_tool_outputs(
        run.pk, {"p": {"output": {"color": "teal"}, "is_error": False}}
    )
    assert run.status == "completed"
    history = load_messages(conversation)
    assert history[2] == ChatMessage.tool_result("p", '{"color": "teal"}')
    assert "teal" in history[3].content


def test_cancel_answers_pending_calls_and_frees_the_conversation() -> None:
    conversation = create_conversation()
    service = echo_service()
    run = service.send(
        conversation, ChatMessage.user(calls_text(("d", "delete_file", {"path": "/"})))
    )
    run = service.cancel(run.pk)
    assert (run.status, run.termination_reason) == ("cancelled", "cancelled")
    assert load_messages(conversation)[-1].is_error
    with pytest.raises(RunStateError):
        service.cancel(run.pk)
    assert service.send(conversation, ChatMessage.user("next")).status == "completed"


def test_a_cancel_while_tools_run_wins_over_their_late_results(
    django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    # The tool cancels through the test's own connection, so it runs inline.
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "TOOL_TIMEOUT": None}
    finished: list[str] = []

    def on_finish(sender: Any, run: Run, **kwargs: Any) -> None:
        finished.append(run.status)

    conversation = create_conversation()
    run_finished.connect(on_finish)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            run = echo_service().send(
                conversation, ChatMessage.user(calls_text(("x", "cancel_own_run", {})))
            )
            # Sent on commit, like message_appended: not inside cancel()'s transaction.
            assert finished == []
    finally:
        run_finished.disconnect(on_finish)
    assert (run.status, run.termination_reason, run.error_type) == ("cancelled", "cancelled", "")
    assert finished == ["cancelled"]
    history = load_messages(conversation)
    assert history[-1] == ChatMessage.tool_result(
        "x", "The run was cancelled before this tool call ran.", is_error=True
    )
    assert len(history) == 3  # the tool's late result was not stored


def test_a_finished_run_is_not_claimed_again() -> None:
    service = echo_service()
    run = service.send(create_conversation(), ChatMessage.user("hi"))
    assert list(service.events(run.pk)) == []
    assert Run.objects.get(pk=run.pk).status == "completed"


# Crash and resume; busy conversations ----------------------------------------------


def test_a_crashed_run_resumes_and_runs_only_unanswered_calls() -> None:
    conversation = create_conversation()
    service = echo_service()
    run = service.start(conversation, ChatMessage.user("weather?"))
    # The worker stored the reply and one result, then died.
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, iterations=1)
    reply = CompletionResponse(
        "",
        (ToolCall("a", "get_time"), ToolCall("b", "get_weather", {"city": "Oslo"})),
        usage=Usage(1, 1),
        provider="echo",
    )
    append_completion(conversation, reply, run=run)
    append_messages(conversation, [ChatMessage.tool_result("a", "08:59")], run=run)
    run = service.execute(run.pk)
    assert run.status == "completed"
    assert loop_tools.gauge.calls == ["get_weather:Oslo"]
    assert [m.role for m in load_messages(conversation)] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


def test_a_second_run_is_refused_while_one_is_active() -> None:
    conversation = create_conversation()
    service = echo_service()
    run = service.start(conversation, ChatMessage.user("one"))
    with pytest.raises(ConversationBusy):
        service.start(conversation, ChatMessage.user("two"))
    assert load_messages(conversation) == [ChatMessage.user("one")]
    service.execute(run.pk)
    assert service.send(conversation, ChatMessage.user("two")).status == "completed"


def test_signals_report_messages_and_finished_runs(
    django_capture_on_commit_callbacks: Any,
) -> None:
    appended: list[int] = []
    finished: list[str] = []

    def on_append(sender: Any, messages: list[Message], **kwargs: Any) -> None:
        appended.append(len(messages))

    def on_finish(sender: Any, run: Run, **kwargs: Any) -> None:
        finished.append(run.status)

    message_appended.connect(on_append)
    run_finished.connect(on_finish)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            echo_service().send(
                create_conversation(), ChatMessage.user(calls_text(("a", "get_time", {})))
            )
            assert appended == []  # nothing is committed yet
    finally:
        message_appended.disconnect(on_append)
        run_finished.disconnect(on_finish)
    assert appended == [1, 1, 1, 1]  # user, assistant, tool result, assistant
    assert finished == ["completed"]


# Per round, two transactions: the reply (the run's conditional update, which
# counts the call and renews the lease; the store's conditional update of the
# conversation; the insert; the events: message.stored with tool_call.started),
# then the tool results (the conversation's update, conditional on the run's
# lease too; the insert; the events). The history is read once per execution.
# On PostgreSQL each transaction also sends its events' NOTIFY (one statement).
STATEMENTS_PER_TOOL_ROUND = 4 + 3
TRANSACTIONS_PER_TOOL_ROUND = 2
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT")


# The adapter's turns are priced, so the budget includes counting their cost.
PRICED_OPENAI = {
    "DEFAULT_PROVIDER": "echo",
    "PROVIDERS": {
        "echo": {"BACKEND": "echo", "MODEL": "echo"},
        "openai": {
            "BACKEND": "openai",
            "MODEL": "gpt-test",
            "API_KEY": "sk-test",
            "MODEL_INFO": {"gpt-test": {"prices": {"input": "2.50", "output": "10"}}},
        },
    },
}


@override_settings(LLM_CONVERSATIONS=PRICED_OPENAI)
def test_queries_per_round_are_constant() -> None:
    def queries_for(tool_rounds: int) -> tuple[int, int]:
        def handler(body: dict[str, Any]) -> dict[str, Any]:
            done = sum(1 for m in body["messages"] if m["role"] == "assistant")
            if done < tool_rounds:
                call = {
                    "id": f"c{done}",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                }
                return openai_reply(
                    {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
                )
            return openai_reply({"role": "assistant", "content": "done"}, "stop")

        service = openai_service(handler, [])
        run = service.start(create_conversation(), ChatMessage.user("go"))
        with CaptureQueriesContext(connection) as captured:
            assert service.execute(run.pk).status == "completed"
        # 10 input and 5 output tokens a call at 2.50 and 10 dollars per million.
        assert Run.objects.get(pk=run.pk).cost == Decimal("0.000075") * (tool_rounds + 1)
        control = [q for q in captured if q["sql"].startswith(TRANSACTION_CONTROL)]
        notifies = [q for q in captured if "pg_notify" in q["sql"]]
        logged = [
            q for q in captured if q["sql"].startswith('INSERT INTO "llm_conversations_runevent"')
        ]
        assert len(notifies) == (len(logged) if connection.vendor == "postgresql" else 0)
        return len(captured) - len(control) - len(notifies), len(control)

    one, two, three = queries_for(1), queries_for(2), queries_for(3)
    assert two[0] - one[0] == three[0] - two[0] == STATEMENTS_PER_TOOL_ROUND
    # In the test's transaction each transaction is a savepoint and its release.
    assert two[1] - one[1] == three[1] - two[1] == 2 * TRANSACTIONS_PER_TOOL_ROUND


def test_every_stored_event_row_points_to_the_run() -> None:
    service = echo_service()
    run = service.start(create_conversation(), ChatMessage.user(calls_text(("a", "get_time", {}))))
    rows = [
        e.message for e in service.events(run.pk) if isinstance(e, MessageStored | ToolResultStored)
    ]
    assert rows
    assert {row.run_id for row in rows} == {run.pk}
    assert not [
        e for e in service.events(run.pk) if isinstance(e, RunRequiresAction | ToolCallStarted)
    ]


@requires_postgresql
@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_admit_exactly_one_run() -> None:
    conversation = create_conversation()
    workers = 6

    def work(n: int) -> str:
        try:
            echo_service().start(conversation.pk, ChatMessage.user(f"hello {n}"))
        except ConversationBusy:
            return "busy"
        return "started"

    outcomes = run_together(workers, work)
    assert sorted(outcomes) == ["busy"] * (workers - 1) + ["started"]
    assert Run.objects.filter(conversation=conversation).count() == 1
    assert len(load_messages(conversation)) == 1
