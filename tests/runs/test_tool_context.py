"""ToolContext: injected by the loop, hidden from the model, right in every thread."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from django.contrib.auth.models import User

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.models import RunEvent, RunEventType, RunStatus
from llm_conversations.providers import EchoProvider
from llm_conversations.runs import ToolLoopService
from llm_conversations.tools import ToolContext, ToolError, ToolRegistry, tool
from tests.conftest import requires_postgresql, run_together

seen: list[tuple[str, str, str]] = []
"""(call id, user name, thread name) for each call of ``whoami``."""
seen_lock = threading.Lock()


@tool
def whoami(label: str, context: ToolContext) -> str:
    """Says whose conversation the call belongs to."""
    time.sleep(0.05)  # the other calls of the turn start meanwhile
    with seen_lock:
        seen.append((context.call_id, context.user.username, threading.current_thread().name))
    assert context.run.conversation_id == context.conversation.pk
    return f"{label}:{context.user.username}"


@tool
def slow_count(steps: int, context: ToolContext) -> str:
    """Counts, reporting progress at each step."""
    for step in range(1, steps + 1):
        context.progress(f"step {step} of {steps}", step / steps)
    return "counted"


@tool
def cancelled_midway(context: ToolContext) -> str:
    """Cancels its own run, then reports progress, which is refused."""
    ToolLoopService().cancel(context.run.pk)
    return f"recorded={context.progress('after the cancel')}"


def registry() -> ToolRegistry:
    return ToolRegistry([whoami, slow_count, cancelled_midway])


def service() -> ToolLoopService:
    return ToolLoopService(EchoProvider(), tools=registry())


def calls_text(*calls: tuple[str, str, dict[str, Any]]) -> str:
    return json.dumps(
        {
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ]
        }
    )


def tool_outputs(conversation: Any) -> dict[str, str]:
    return {m.tool_call_id or "": m.content for m in load_messages(conversation) if m.tool_call_id}


def test_the_tool_context_parameter_is_not_in_the_schema() -> None:
    assert whoami.parameters == {
        "type": "object",
        "properties": {"label": {"type": "string"}},
        "required": ["label"],
        "additionalProperties": False,
    }
    assert whoami.wants_tool_context


def test_the_model_cannot_pass_the_context() -> None:
    call = ToolCall("c1", "whoami", {"label": "x", "context": {"user": "root"}})
    with pytest.raises(Exception, match="context"):
        whoami.validate_call(call)


def test_a_call_without_a_run_is_answered_with_an_error() -> None:
    result = whoami.execute(ToolCall("c1", "whoami", {"label": "x"}))
    assert result.is_error
    assert "needs the tool context of a run" in result.content


def test_two_tool_context_parameters_are_refused() -> None:
    def both(a: ToolContext, b: ToolContext) -> str:
        return ""

    with pytest.raises(ToolError, match="only one parameter"):
        tool(both)


@requires_postgresql  # two loops writing at once; SQLite's shared test database locks
@pytest.mark.django_db(transaction=True)
def test_two_users_at_once_in_parallel_calls_each_see_their_own() -> None:
    seen.clear()
    users = [User.objects.create_user(name) for name in ("alice", "bob")]
    conversations = [create_conversation(owner=user) for user in users]

    def work(n: int) -> Any:
        name = users[n].username
        text = calls_text(
            (f"{name}-1", "whoami", {"label": "one"}), (f"{name}-2", "whoami", {"label": "two"})
        )
        return service().send(conversations[n].pk, ChatMessage.user(text))

    finished = run_together(2, work)
    assert not [o for o in finished if isinstance(o, BaseException)], finished
    assert [run.status for run in finished] == [RunStatus.COMPLETED, RunStatus.COMPLETED]
    assert tool_outputs(conversations[0]) == {"alice-1": "one:alice", "alice-2": "two:alice"}
    assert tool_outputs(conversations[1]) == {"bob-1": "one:bob", "bob-2": "two:bob"}
    assert sorted((call, user) for call, user, _ in seen) == [
        ("alice-1", "alice"),
        ("alice-2", "alice"),
        ("bob-1", "bob"),
        ("bob-2", "bob"),
    ]
    # Parallel calls ran on pool threads, not on the threads that ran the loops.
    assert all(thread.startswith("ThreadPoolExecutor") for *_, thread in seen)


@pytest.mark.django_db(transaction=True)
def test_a_run_executed_by_id_elsewhere_builds_the_context_from_the_run() -> None:
    seen.clear()
    user = User.objects.create_user("carol")
    conversation = create_conversation(owner=user)
    run = service().start(conversation, calls_text(("c1", "whoami", {"label": "bg"})))
    # Another thread with its own connection and service: a worker given the id.
    [done] = run_together(1, lambda n: service().execute(str(run.pk)))
    assert done.status == RunStatus.COMPLETED
    assert tool_outputs(conversation) == {"c1": "bg:carol"}


@pytest.mark.django_db(transaction=True)
def test_progress_becomes_run_events_in_order() -> None:
    conversation = create_conversation()
    run = service().send(conversation, calls_text(("c1", "slow_count", {"steps": 2})))
    events = list(RunEvent.objects.filter(run=run).values_list("type", "data"))
    progress = [data for kind, data in events if kind == RunEventType.TOOL_CALL_PROGRESS]
    assert progress == [
        {"tool_call_id": "c1", "text": "step 1 of 2", "fraction": 0.5},
        {"tool_call_id": "c1", "text": "step 2 of 2", "fraction": 1.0},
    ]
    kinds = [kind for kind, _ in events]
    started = kinds.index(RunEventType.TOOL_CALL_STARTED)
    stored = kinds.index(RunEventType.TOOL_RESULT_STORED)
    assert started < kinds.index(RunEventType.TOOL_CALL_PROGRESS) < stored
    assert conversation.owner is None  # a conversation without an owner: user is None


@pytest.mark.django_db(transaction=True)
def test_progress_after_the_run_stopped_records_nothing() -> None:
    conversation = create_conversation()
    run = service().send(conversation, calls_text(("c1", "cancelled_midway", {})))
    assert run.status == RunStatus.CANCELLED
    types = set(RunEvent.objects.filter(run=run).values_list("type", flat=True))
    assert RunEventType.TOOL_CALL_PROGRESS not in types


@pytest.mark.parametrize("fraction", [-0.1, 1.5, True, "half"])
def test_a_bad_fraction_is_refused(fraction: Any) -> None:
    context = ToolContext(None, None, None, "c1", lambda message, fraction: True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fraction"):
        context.progress("x", fraction)


@pytest.mark.django_db(transaction=True)
def test_progress_is_in_the_run_s_event_stream() -> None:
    from llm_conversations.api.streams.events import EventsStream
    from llm_conversations.runs.log.reader import read_page
    from tests.api.conftest import parse_sse

    run = service().send(create_conversation(), calls_text(("c1", "slow_count", {"steps": 1})))
    events = parse_sse(EventsStream(run.pk).render(read_page(run.pk, 0)))
    progress = [data for name, data in events if name == "tool_call.progress"]
    assert progress == [
        {
            "run_id": str(run.pk),
            "progress": {"tool_call_id": "c1", "text": "step 1 of 1", "fraction": 1.0},
        }
    ]
