"""A start on a busy conversation: reject, enqueue, interrupt, rollback (``if_busy``).

The active run is real: a model mid-reply (it has streamed 12 words and is
still answering), a run paused for an approval, or a run stored and not yet
executed. Every strategy is exercised through the API; the conversation is
checked after each: every call answered, positions gap-free, and the next run
accepted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from llm_conversations.conf import conf
from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.conversations.attachments import create_attachment
from llm_conversations.core.messages import Role
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Conversation, Message, Run, RunEventType, RunStatus
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.log import writer
from llm_conversations.runs.reaper import reap_runs
from tests.api.conftest import API_SETTINGS, calls_text, parse_sse
from tests.api.test_runs import runs_url, start
from tests.conftest import requires_postgresql, run_together, task_backend
from tests.runs.test_cancelled_replies import WORDS
from tests.support.attachment_files import image_bytes
from tests.support.streaming import streamed

pytestmark = pytest.mark.django_db(transaction=True)

STORY = "Tell me a story."  # what the slow provider streams 12 words for


@pytest.fixture(autouse=True)
def slow(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    providers = {
        **API_SETTINGS["PROVIDERS"],
        "slow": {"BACKEND": "tests.runs.test_cancelled_replies.Slow", "MODEL": "s"},
    }
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "PROVIDERS": providers}
    monkeypatch.setattr(writer, "TEXT_FLUSH_CHARS", 1)


@pytest.fixture
def mid_reply(conversation: Conversation) -> Iterator[Run]:
    """The conversation's run, its model mid-reply: 12 words streamed, still answering."""
    loop = ToolLoopService()
    run = loop.start(conversation, STORY, provider="slow")
    executing = streamed(loop, run.pk, len(WORDS))
    yield run
    executing.close()


def assert_usable(conversation: Conversation) -> list[Message]:
    """Every call answered, positions gap-free, the count right; a next run completes."""
    history = load_messages(conversation)
    assert check_sequence(history) == ()
    rows = list(conversation.messages.order_by("position"))
    assert [m.position for m in rows] == list(range(len(rows)))
    conversation.refresh_from_db()
    assert conversation.message_count == len(rows)
    assert not Run.objects.filter(conversation=conversation, status=RunStatus.WAITING).exists()
    return rows


def contents(conversation: Conversation) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in conversation.messages.order_by("position")]


# reject -------------------------------------------------------------------------


@pytest.mark.parametrize("body", [{}, {"if_busy": "reject"}])
def test_reject_is_the_default_and_stores_nothing(
    client: APIClient, conversation: Conversation, mid_reply: Run, body: dict[str, Any]
) -> None:
    response = start(client, conversation, message="And then?", **body)
    assert (response.status_code, response.json()["error"]["code"]) == (409, "conversation_busy")
    assert Run.objects.filter(conversation=conversation).count() == 1
    assert contents(conversation) == [("user", "Hi"), ("user", STORY)]


def test_the_setting_chooses_the_strategy_of_a_start_that_names_none(
    client: APIClient, conversation: Conversation, mid_reply: Run, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "BUSY_STRATEGY": "enqueue"}
    response = start(client, conversation, message="And then?")
    assert (response.status_code, response.json()["status"]) == (202, "waiting")
    refused = start(client, conversation, message="And then?", if_busy="reject")
    assert refused.status_code == 409


def test_an_unknown_strategy_is_a_400_naming_the_field(
    client: APIClient, conversation: Conversation
) -> None:
    response = start(client, conversation, message="hi", if_busy="queue")
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["field"]) == (400, "invalid", "if_busy")
    assert not Run.objects.filter(conversation=conversation).exists()


# enqueue ------------------------------------------------------------------------


def test_enqueued_runs_wait_without_a_turn_then_run_in_order(
    client: APIClient, conversation: Conversation, mid_reply: Run
) -> None:
    second = start(client, conversation, message="second", if_busy="enqueue")
    assert second.status_code == 202
    second_run = second.json()
    assert (second_run["status"], second_run["waits_for"]) == ("waiting", str(mid_reply.pk))
    third = start(client, conversation, message="third", if_busy="enqueue").json()
    assert (third["status"], third["waits_for"]) == ("waiting", second_run["id"])
    # Not in the transcript yet: the active run may still add turns.
    assert contents(conversation) == [("user", "Hi"), ("user", STORY)]
    # The active run ends (here by a cancel): the waiting runs start, one at a time.
    cancelled = client.post(f"{runs_url(conversation)}{mid_reply.pk}/cancel/")
    assert cancelled.json()["status"] == "cancelled"
    statuses = dict(Run.objects.filter(conversation=conversation).values_list("pk", "status"))
    assert statuses == {
        mid_reply.pk: "cancelled",
        Run.objects.get(pk=second_run["id"]).pk: "completed",
        Run.objects.get(pk=third["id"]).pk: "completed",
    }
    rows = assert_usable(conversation)
    assert [(m.role, m.content) for m in rows] == [
        ("user", "Hi"),
        ("user", STORY),
        ("assistant", "".join(WORDS)),
        ("user", "second"),
        ("assistant", "second"),
        ("user", "third"),
        ("assistant", "third"),
    ]
    assert [str(m.run_id) for m in rows[3:]] == [second_run["id"]] * 2 + [third["id"]] * 2


def test_an_enqueued_run_starts_when_the_active_one_completes(
    client: APIClient, conversation: Conversation
) -> None:
    first = ToolLoopService().start(conversation, "first")  # stored, not executed yet
    waiting = start(client, conversation, message="second", if_busy="enqueue").json()
    assert waiting["waits_for"] == str(first.pk)
    done = ToolLoopService().execute(first.pk)
    assert done.status == RunStatus.COMPLETED
    assert Run.objects.get(pk=waiting["id"]).status == RunStatus.COMPLETED
    assert [c for _, c in contents(conversation)] == ["Hi", "first", "first", "second", "second"]
    assert_usable(conversation)


def test_an_enqueued_run_starts_when_the_reaper_fails_the_active_one(
    client: APIClient, conversation: Conversation
) -> None:
    first = ToolLoopService().start(conversation, "first")
    # Its worker died for the last time: the lease expired on the last attempt.
    Run.objects.filter(pk=first.pk).update(
        status=RunStatus.RUNNING,
        lease_owner="gone",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
        attempts=conf.MAX_ATTEMPTS,
    )
    waiting = start(client, conversation, message="second", if_busy="enqueue").json()
    assert reap_runs().failed == (first.pk,)
    assert Run.objects.get(pk=waiting["id"]).status == RunStatus.COMPLETED
    assert [c for _, c in contents(conversation)] == ["Hi", "first", "second", "second"]
    assert_usable(conversation)


def test_a_waiting_run_whose_turn_can_no_longer_be_stored_fails_and_the_next_starts(
    client: APIClient, conversation: Conversation, user: User
) -> None:
    first = ToolLoopService().start(conversation, "first")
    image = create_attachment(user, image_bytes("PNG", (8, 8)), filename="dot.png")[0]
    parts = [{"type": "text", "text": "see"}, {"type": "image", "attachment_id": str(image.pk)}]
    turn = {"role": "user", "content": parts}
    doomed = start(client, conversation, message=turn, if_busy="enqueue").json()
    after = start(client, conversation, message="third", if_busy="enqueue").json()
    image.delete()  # a waiting turn is not a stored one: nothing refuses
    ToolLoopService().execute(first.pk)
    failed = Run.objects.get(pk=doomed["id"])
    assert (failed.status, failed.termination_reason) == (RunStatus.FAILED, "error")
    assert (failed.error_type, failed.waiting_turn) == ("InvalidMessage", {})
    # It ended as every run ends: through the one transition, its end event logged.
    assert list(failed.events.values_list("type", flat=True)) == [RunEventType.RUN_FAILED]
    assert Run.objects.get(pk=after["id"]).status == RunStatus.COMPLETED
    assert [c for _, c in contents(conversation)] == ["Hi", "first", "first", "third", "third"]
    assert_usable(conversation)


def test_enqueue_on_an_idle_conversation_starts_at_once(
    client: APIClient, conversation: Conversation
) -> None:
    response = start(client, conversation, message="hello", if_busy="enqueue")
    run = response.json()
    assert (response.status_code, run["status"], run["waits_for"]) == (201, "completed", None)


def test_a_waiting_run_can_be_cancelled_and_the_one_behind_it_moves_up(
    client: APIClient, conversation: Conversation
) -> None:
    first = ToolLoopService().start(conversation, "first")
    second = start(client, conversation, message="second", if_busy="enqueue").json()
    third = start(client, conversation, message="third", if_busy="enqueue").json()
    cancelled = client.post(f"{runs_url(conversation)}{second['id']}/cancel/").json()
    assert (cancelled["status"], cancelled["termination_reason"]) == ("cancelled", "cancelled")
    assert Run.objects.get(pk=third["id"]).waits_for_id == first.pk
    events = client.get(f"{runs_url(conversation)}{second['id']}/events/")
    assert [name for name, _ in parse_sse(b"".join(events.streaming_content))] == ["run.cancelled"]
    ToolLoopService().execute(first.pk)
    assert [c for _, c in contents(conversation)] == ["Hi", "first", "first", "third", "third"]
    assert_usable(conversation)


def test_a_full_line_refuses_the_next_waiting_run_and_stores_nothing(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "MAX_WAITING_RUNS": 2}
    first = ToolLoopService().start(conversation, "first")
    for message in ("second", "third"):
        assert start(client, conversation, message=message, if_busy="enqueue").status_code == 202
    refused = start(client, conversation, message="fourth", if_busy="enqueue")
    assert (refused.status_code, refused.json()["error"]["code"]) == (429, "too_many_waiting_runs")
    assert Run.objects.filter(conversation=conversation).count() == 3
    # The active run ends and the line drains (the test's task backend runs each
    # waiting run as it is queued): the next start runs at once.
    ToolLoopService().execute(first.pk)
    assert start(client, conversation, message="fourth", if_busy="enqueue").status_code == 201
    assert [c for _, c in contents(conversation)][-2:] == ["fourth", "fourth"]


def test_an_enqueued_chat_message_streams_its_run_once_it_starts(
    client: APIClient, conversation: Conversation
) -> None:
    first = ToolLoopService().start(conversation, "first")
    body = {
        "messages": [{"id": "m2", "role": "user", "parts": [{"type": "text", "text": "second"}]}],
        "if_busy": "enqueue",
    }
    url = f"/api/conversations/{conversation.pk}/chat/"
    response = client.post(url, body, format="json")
    assert response.status_code == 200
    waiting = Run.objects.get(pk=response["X-Run-Id"])
    assert (waiting.status, waiting.waits_for_id) == (RunStatus.WAITING, first.pk)
    ToolLoopService().execute(first.pk)
    stream = b"".join(response.streaming_content).decode()
    chunks = [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: {")]
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "second"
    assert stream.rstrip().endswith("data: [DONE]")
    message = conversation.messages.get(content="second", role="user")
    assert message.metadata == {"ui_message_id": "m2"}


def test_the_ai_sdk_stop_ends_the_streaming_run_and_the_waiting_one_starts(
    client: APIClient, conversation: Conversation, mid_reply: Run
) -> None:
    waiting = start(client, conversation, message="second", if_busy="enqueue").json()
    stop = f"/api/conversations/{conversation.pk}/chat/{conversation.pk}/stop"
    stopped = client.post(stop, {"activeStreamId": str(mid_reply.pk)}, format="json")
    assert (stopped.status_code, stopped.json()["status"]) == (200, "cancelled")
    assert Run.objects.get(pk=waiting["id"]).status == RunStatus.COMPLETED
    assert contents(conversation)[2:] == [
        ("assistant", "".join(WORDS)),
        ("user", "second"),
        ("assistant", "second"),
    ]


def test_a_chat_message_sent_mid_reply_interrupts_it(
    client: APIClient, conversation: Conversation, mid_reply: Run
) -> None:
    body = {
        "messages": [{"id": "m9", "role": "user", "parts": [{"type": "text", "text": "Stop."}]}],
        "if_busy": "interrupt",
    }
    response = client.post(f"/api/conversations/{conversation.pk}/chat/", body, format="json")
    stream = b"".join(response.streaming_content).decode()
    assert '"type":"text-delta"' in stream
    assert Run.objects.get(pk=response["X-Run-Id"]).replaced_id == mid_reply.pk
    mid_reply.refresh_from_db()
    assert mid_reply.termination_reason == "interrupted"
    assert contents(conversation)[2:] == [
        ("assistant", "".join(WORDS)),
        ("user", "Stop."),
        ("assistant", "Stop."),
    ]
    assert_usable(conversation)


@requires_postgresql
@pytest.mark.parametrize("busy", [False, True])
def test_simultaneous_enqueued_starts_all_run_in_order(user: User, busy: bool) -> None:
    conversation = create_conversation(owner=user, title="Double text")
    first = ToolLoopService().start(conversation, "first") if busy else None
    workers = 6

    def work(n: int) -> tuple[int, dict[str, Any]]:
        api = APIClient()
        api.force_authenticate(user)
        response = start(api, conversation, message=f"text {n}", if_busy="enqueue")
        return response.status_code, response.json()

    outcomes = run_together(workers, work)
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    if first is not None:
        assert {status for status, _ in outcomes} == {202}
        ToolLoopService().execute(first.pk)
    else:
        # The first started at once; the others waited behind it (a task ran each in
        # turn), or started at once too if every run before them had ended by then.
        statuses = {status for status, _ in outcomes}
        assert statuses <= {201, 202}
        assert 201 in statuses
    runs = list(Run.objects.filter(conversation=conversation).order_by("created_at"))
    assert [r.status for r in runs] == [RunStatus.COMPLETED] * len(runs)
    # Each waited for the one stored before it (or for none: nothing was active),
    # and their turns follow that order.
    waited = [r.waits_for_id for r in runs[1:]]
    if first is not None:
        assert waited == [r.pk for r in runs[:-1]]
    assert all(w in (None, r.pk) for w, r in zip(waited, runs, strict=False))
    # Exactly the starts answered 202 waited.
    assert sum(w is not None for w in waited) == [s for s, _ in outcomes].count(202)
    rows = assert_usable(conversation)
    order = [m.run_id for m in rows if m.role == Role.USER and m.run_id is not None]
    assert order == [r.pk for r in runs]
    assert len(rows) == 2 * len(runs)


@requires_postgresql
@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
def test_simultaneous_interrupting_starts_leave_one_run_and_a_valid_conversation(
    user: User, settings: Any, strategy: str
) -> None:
    settings.TASKS = {"default": {"BACKEND": task_backend("dummy.DummyBackend")}}
    conversation = create_conversation(owner=user, title="Changed my mind")
    first = ToolLoopService().start(conversation, "first")
    workers = 5

    def work(n: int) -> tuple[int, dict[str, Any]]:
        api = APIClient()
        api.force_authenticate(user)
        body = {"message": f"text {n}", "if_busy": strategy, "background": True}
        response = start(api, conversation, **body)
        return response.status_code, response.json()

    outcomes = run_together(workers, work)
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    assert {status for status, _ in outcomes} == {202}
    runs = list(Run.objects.filter(conversation=conversation).order_by("created_at"))
    # Each interrupted the one before it; the last is the one left active.
    assert runs[0].pk == first.pk
    assert [r.replaced_id for r in runs[1:]] == [r.pk for r in runs[:-1]]
    assert [r.status for r in runs] == [RunStatus.CANCELLED] * workers + [RunStatus.QUEUED]
    reason = "interrupted" if strategy == "interrupt" else "rolled_back"
    assert {r.termination_reason for r in runs[:-1]} == {reason}
    history = assert_usable(conversation)
    kept = runs if strategy == "interrupt" else runs[-1:]
    assert [m.run_id for m in history] == [r.pk for r in kept]


# interrupt ----------------------------------------------------------------------


def replace_mid_reply(
    client: APIClient, conversation: Conversation, mid_reply: Run, strategy: str
) -> None:
    """Start "Something else." with ``strategy``: it completes in the request, in place
    of ``mid_reply`` (refreshed: cancelled)."""
    response = start(client, conversation, message="Something else.", if_busy=strategy)
    run = response.json()
    assert (response.status_code, run["status"], run["replaced"]) == (
        201,
        "completed",
        str(mid_reply.pk),
    )
    mid_reply.refresh_from_db()
    assert mid_reply.status == "cancelled"


def test_interrupt_keeps_the_streamed_text_and_starts_the_new_run(
    client: APIClient, conversation: Conversation, mid_reply: Run
) -> None:
    replace_mid_reply(client, conversation, mid_reply, "interrupt")
    assert mid_reply.termination_reason == "interrupted"
    rows = assert_usable(conversation)
    assert [(m.role, m.content, m.finish_reason) for m in rows[1:]] == [
        ("user", STORY, ""),
        ("assistant", "".join(WORDS), "cancelled"),
        ("user", "Something else.", ""),
        ("assistant", "Something else.", "stop"),
    ]


def test_interrupt_keeps_the_waiting_runs_behind_the_new_one(
    client: APIClient, conversation: Conversation
) -> None:
    first = ToolLoopService().start(conversation, "first")
    waiting = start(client, conversation, message="later", if_busy="enqueue").json()
    now = start(client, conversation, message="now", if_busy="interrupt", background=True)
    assert now.status_code == 202
    assert Run.objects.get(pk=waiting["id"]).waits_for_id == Run.objects.get(pk=now.json()["id"]).pk
    assert Run.objects.get(pk=first.pk).termination_reason == "interrupted"
    ToolLoopService().execute(now.json()["id"])
    assert [c for _, c in contents(conversation)] == ["Hi", "first", "now", "now", "later", "later"]
    assert_usable(conversation)


def test_interrupt_on_an_idle_conversation_interrupts_nothing(
    client: APIClient, conversation: Conversation
) -> None:
    run = start(client, conversation, message="hello", if_busy="rollback").json()
    assert (run["status"], run["replaced"]) == ("completed", None)


# rollback -----------------------------------------------------------------------


def test_rollback_removes_the_cancelled_runs_turns(
    client: APIClient, conversation: Conversation, mid_reply: Run
) -> None:
    replace_mid_reply(client, conversation, mid_reply, "rollback")
    assert mid_reply.termination_reason == "rolled_back"
    assert contents(conversation) == [
        ("user", "Hi"),
        ("user", "Something else."),
        ("assistant", "Something else."),
    ]
    assert_usable(conversation)
    assert start(client, conversation, message="Go on.").json()["status"] == "completed"
    assert_usable(conversation)


# A run paused for an approval is busy too --------------------------------------


@pytest.fixture
def paused(client: APIClient, conversation: Conversation) -> dict[str, Any]:
    text = calls_text(("d1", "delete_file", {"path": "/tmp/x"}))
    run = start(client, conversation, message=text, provider="echo").json()
    assert run["status"] == "requires_action"
    return run


def test_a_paused_run_refuses_a_start_by_default(
    client: APIClient, conversation: Conversation, paused: dict[str, Any]
) -> None:
    assert start(client, conversation, message="hi").status_code == 409


def test_a_run_enqueued_behind_a_paused_one_starts_once_it_is_decided(
    client: APIClient, conversation: Conversation, paused: dict[str, Any]
) -> None:
    waiting = start(client, conversation, message="next", if_busy="enqueue").json()
    assert waiting["waits_for"] == paused["id"]
    denied = client.post(f"{runs_url(conversation)}{paused['id']}/deny/", {}, format="json")
    assert denied.json()["status"] == "completed"
    assert Run.objects.get(pk=waiting["id"]).status == RunStatus.COMPLETED
    assert contents(conversation)[-2:] == [("user", "next"), ("assistant", "next")]
    assert_usable(conversation)


def test_interrupting_a_paused_run_answers_its_call(
    client: APIClient, conversation: Conversation, paused: dict[str, Any]
) -> None:
    run = start(client, conversation, message="never mind", if_busy="interrupt").json()
    assert (run["status"], run["replaced"]) == ("completed", paused["id"])
    rows = assert_usable(conversation)
    result = next(m for m in rows if m.role == Role.TOOL)
    assert (result.tool_call_id, result.is_error) == ("d1", True)
    assert "interrupted" in result.content
    assert Run.objects.get(pk=paused["id"]).termination_reason == "interrupted"


def test_rolling_back_a_paused_run_removes_its_call_and_turn(
    client: APIClient, conversation: Conversation, paused: dict[str, Any]
) -> None:
    run = start(client, conversation, message="never mind", if_busy="rollback").json()
    assert run["status"] == "completed"
    assert contents(conversation) == [
        ("user", "Hi"),
        ("user", "never mind"),
        ("assistant", "never mind"),
    ]
    assert Run.objects.get(pk=paused["id"]).termination_reason == "rolled_back"
    assert_usable(conversation)


# Query counts ---------------------------------------------------------------------


def test_an_enqueued_start_costs_three_queries_more_than_a_refused_one(
    client: APIClient, conversation: Conversation
) -> None:
    ToolLoopService().start(conversation, "first")
    start(client, conversation, message="warm", if_busy="enqueue")  # caches settle

    def queries(**body: Any) -> int:
        with CaptureQueriesContext(connection) as captured:
            start(client, conversation, message="next", **body)
        return len(captured)

    refused = queries(if_busy="reject")
    # The run ahead of it, read under the lock, its user turn counted out again
    # (the lock counted it in), and the run's insert: however many wait already.
    assert [queries(if_busy="enqueue") for _ in range(3)] == [refused + 3] * 3
    assert refused <= 5
