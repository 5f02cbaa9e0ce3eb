"""Leases, recovery, background execution and the durable event log of runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.utils import timezone

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.core.sequence import check_sequence
from llm_conversations.exceptions import RunStateError
from llm_conversations.models import Run, RunEvent, RunStatus
from llm_conversations.providers import Provider, ResponseCompleted, StreamEvent, TextDelta
from llm_conversations.runs import ToolLoopService, leases
from llm_conversations.runs.leases import claim, new_owner
from llm_conversations.runs.reaper import reap_runs
from llm_conversations.runs.service import enqueue_run
from llm_conversations.tools import ToolRegistry, tool
from tests.conftest import requires_postgresql


class CallsThenAnswers(Provider):
    """Asks for one call of ``tool_name`` until a result is stored, then answers."""

    backend = "scripted"
    uses_http = False

    def __init__(self, tool_name: str = "noop", **settings: Any) -> None:
        super().__init__(**{"model": "scripted", **settings})
        self.tool_name = tool_name
        self.calls = 0

    def send(self, request: Any) -> CompletionResponse:
        self.calls += 1
        if request.messages[-1].role == "tool":
            return CompletionResponse("done")
        return CompletionResponse("", (ToolCall(f"c{self.calls}", self.tool_name),))


@tool
def noop() -> str:
    """Does nothing."""
    return "ok"


@tool(requires_approval=True)
def guarded() -> str:
    """Does nothing, once a person approves."""
    return "approved"


def execute_closing(loop: ToolLoopService, run_id: Any) -> None:
    """Execute a run in a thread, closing the thread's own connection at the end."""
    try:
        loop.execute(run_id)
    finally:
        connections.close_all()


def service(provider: Provider | None = None, *tools: Any) -> ToolLoopService:
    return ToolLoopService(provider or CallsThenAnswers(), tools=ToolRegistry(tools or [noop]))


@pytest.fixture
def scripted_from_settings(settings: Any) -> None:
    """The scripted provider and ``noop`` as the settings' defaults, as a worker finds them."""
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "TOOLS": ["tests.runs.test_leases.noop"],
        "PROVIDERS": {"s": {"BACKEND": "tests.runs.test_leases.CallsThenAnswers", "MODEL": "s"}},
        "DEFAULT_PROVIDER": "s",
    }


def expire(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        lease_owner="gone-host:1:dead",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )


@pytest.mark.django_db
class TestClaims:
    def test_a_run_held_by_a_live_lease_is_not_executed_twice(self) -> None:
        loop = service()
        run = loop.start(create_conversation(), "hi")
        assert claim(run, new_owner())
        assert list(loop.events(run.pk)) == []  # another execution finds it held
        run.refresh_from_db()
        assert (run.status, run.attempts) == ("running", 1)

    def test_an_expired_lease_is_claimed_as_a_new_attempt(self) -> None:
        loop = service()
        run = loop.start(create_conversation(), "hi")
        expire(run)
        done = loop.execute(run.pk)
        assert (done.status, done.attempts, done.lease_owner) == ("completed", 1, "")
        assert done.lease_expires_at is None

    def test_the_event_log_records_each_step_in_order(self) -> None:
        run = service().send(create_conversation(), "hi")
        events = list(RunEvent.objects.filter(run=run).values_list("type", "data"))
        messages = list(run.messages.order_by("position").values_list("pk", flat=True))
        assert [kind for kind, _ in events] == [
            "run.running",
            "message.stored",
            "tool_call.started",
            "tool_result.stored",
            "text.delta",  # every execution streams: the answer's text, as it came
            "message.stored",
            "run.completed",
        ]
        assert events[0][1] == {"attempt": 1}
        assert events[4][1] == {"delta": "done"}
        assert events[2][1]["tool_call"]["id"] == "c1"
        stored = [data["message"] for kind, data in events if kind.endswith(".stored")]
        assert stored == [str(pk) for pk in messages[1:]]  # after the user turn


@pytest.mark.django_db
class TestRecovery:
    @pytest.mark.usefixtures("scripted_from_settings")
    def test_the_reaper_requeues_a_lost_run_and_a_worker_finishes_it(
        self, django_capture_on_commit_callbacks: Any
    ) -> None:
        run = ToolLoopService().start(create_conversation(), "hi")
        expire(run)
        Run.objects.filter(pk=run.pk).update(attempts=1)
        with django_capture_on_commit_callbacks(execute=True):
            reaped = reap_runs()
        assert (reaped.requeued, reaped.failed) == ((run.pk,), ())
        run.refresh_from_db()
        # The default task backend runs the task at once: the run was finished.
        assert (run.status, run.attempts) == ("completed", 2)

    def test_a_run_lost_too_often_fails_with_its_calls_answered(self, settings: Any) -> None:
        settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "MAX_ATTEMPTS": 2}
        loop = service()
        conversation = create_conversation()
        run = loop.start(conversation, "hi")
        # A worker stored the model's call, then died.
        claim(run, new_owner())
        from llm_conversations.runs.transitions import store_reply

        store_reply(run, CompletionResponse("", (ToolCall("lost", "noop"),)))
        expire(run)
        Run.objects.filter(pk=run.pk).update(attempts=2)
        assert reap_runs().failed == (run.pk,)
        run.refresh_from_db()
        assert (run.status, run.termination_reason) == ("failed", "worker_lost")
        history = load_messages(conversation)
        assert check_sequence(history) == ()
        assert history[-1].tool_call_id == "lost"
        assert history[-1].is_error
        assert loop.send(conversation, "again").status == "completed"

    @pytest.mark.usefixtures("scripted_from_settings")
    def test_a_queued_run_whose_task_was_lost_gets_another_task(
        self, settings: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        settings.LLM_CONVERSATIONS = {
            **settings.LLM_CONVERSATIONS,
            "REQUEUE_SECONDS": 60,
            "LEASE_SECONDS": 600,
        }
        # A worker took the background run's task and died before claiming the run.
        with django_capture_on_commit_callbacks(execute=False):
            run = ToolLoopService().start(create_conversation(), "hi", background=True)
        enqueued = timezone.now()
        Run.objects.filter(pk=run.pk).update(enqueued_at=enqueued)
        # A claimed run is left alone, and so is a foreground run within the window.
        claimed = service().start(create_conversation(), "hi")
        claim(claimed, new_owner())
        waiting = reap_runs(now=enqueued + timedelta(seconds=59))
        assert waiting.reenqueued == ()
        later = enqueued + timedelta(seconds=61)
        Run.objects.filter(pk=claimed.pk).update(queued_at=enqueued)
        with django_capture_on_commit_callbacks(execute=True):
            reaped = reap_runs(now=later)
        assert (reaped.reenqueued, reaped.requeued, reaped.failed) == ((run.pk,), (), ())
        run.refresh_from_db()
        # The default task backend runs the new task at once: a first attempt.
        assert (run.status, run.attempts) == ("completed", 1)
        assert reap_runs(now=later + timedelta(seconds=61)).reenqueued == ()
        claimed.refresh_from_db()
        assert claimed.status == "running"

    @pytest.mark.usefixtures("scripted_from_settings")
    @pytest.mark.parametrize("died", ["after the start", "after an approval", "after a requeue"])
    def test_a_run_whose_process_died_before_its_claim_gets_a_task(
        self, settings: Any, django_capture_on_commit_callbacks: Any, died: str
    ) -> None:
        settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "REQUEUE_SECONDS": 60}
        loop = ToolLoopService()
        if died == "after the start":
            # Stored to run in its request; the process died before claiming it.
            run = loop.start(create_conversation(), "hi")
        elif died == "after an approval":
            settings.LLM_CONVERSATIONS = {
                **settings.LLM_CONVERSATIONS,
                "TOOLS": ["tests.runs.test_leases.noop", "tests.runs.test_leases.guarded"],
                # The paused run names the provider that paused it.
                "PROVIDERS": {
                    **settings.LLM_CONVERSATIONS["PROVIDERS"],
                    "scripted": {
                        "BACKEND": "tests.runs.test_leases.CallsThenAnswers",
                        "MODEL": "s",
                    },
                },
            }
            paused = service(CallsThenAnswers("guarded"), guarded).send(create_conversation(), "hi")
            assert paused.status == "requires_action"
            # The approval is recorded; the process that was to resume the run died.
            run = loop.approve(paused.pk, resume=False)
        else:
            run = loop.start(create_conversation(), "hi")
            expire(run)
            # The reaper committed the requeue and died before its enqueue ran.
            with django_capture_on_commit_callbacks(execute=False):
                assert reap_runs().requeued == (run.pk,)
        run.refresh_from_db()
        assert (run.status, run.enqueued_at is None or died == "after a requeue") == (
            "queued",
            True,
        )
        became_queued = run.queued_at
        assert became_queued is not None
        assert reap_runs(now=became_queued + timedelta(seconds=59)).reenqueued == ()
        with django_capture_on_commit_callbacks(execute=True):
            reaped = reap_runs(now=became_queued + timedelta(seconds=61))
        assert reaped.reenqueued == (run.pk,)
        run.refresh_from_db()
        assert run.status == "completed"  # the task the reaper enqueued executed it

    def test_a_retry_and_a_decision_count_attempts_afresh(self) -> None:
        loop = service()
        run = loop.start(create_conversation(), "hi")
        Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, attempts=3)
        retried = loop.retry(run.pk)
        # A retry gets the whole budget: one attempt used, not four.
        assert (retried.status, retried.attempts) == ("completed", 1)
        # A decision that queues a paused run starts a new stretch of attempts too.
        guarding = service(CallsThenAnswers("guarded"), guarded)
        paused = guarding.send(create_conversation(), "hi")
        Run.objects.filter(pk=paused.pk).update(attempts=3)
        approved = guarding.approve(paused.pk, resume=False)
        assert (approved.status, approved.attempts) == ("queued", 0)
        assert guarding.execute(approved.pk).attempts == 1

    def test_a_live_lease_is_never_reaped(self) -> None:
        run = service().start(create_conversation(), "hi")
        claim(run, new_owner())
        assert reap_runs().requeued == ()
        run.refresh_from_db()
        assert run.status == "running"


@pytest.mark.django_db
class TestBackgroundAndRetry:
    @pytest.mark.usefixtures("scripted_from_settings")
    def test_a_background_start_is_executed_by_the_task_backend(
        self, django_capture_on_commit_callbacks: Any
    ) -> None:
        before = timezone.now()
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            run = ToolLoopService().start(create_conversation(), "hi", background=True)
        assert run.status == "queued"
        # Marked in the insert that stores the run, so the reaper can tell a
        # lost task (REQUEUE_SECONDS) and enqueuing updates nothing.
        marked = Run.objects.get(pk=run.pk).enqueued_at
        assert marked is not None
        assert before <= marked <= timezone.now()
        # Enqueued only once the start is committed (after message_appended).
        (enqueue,) = [c for c in callbacks if getattr(c, "func", None) is enqueue_run]
        assert enqueue.keywords == {"marked": True}
        enqueue()
        run.refresh_from_db()
        assert run.status == "completed"
        assert run.enqueued_at == marked

    @pytest.mark.usefixtures("scripted_from_settings")
    def test_enqueuing_a_run_stored_unmarked_marks_it(self) -> None:
        # Retries, the reaper and the admin's requeue enqueue runs stored earlier.
        run = ToolLoopService().start(create_conversation(), "hi")
        assert Run.objects.get(pk=run.pk).enqueued_at is None
        before = timezone.now()
        enqueue_run(run.pk)
        run.refresh_from_db()
        assert run.status == "completed"
        assert run.enqueued_at is not None
        assert run.enqueued_at >= before

    def test_retry_runs_a_failed_run_again_from_its_turns(self) -> None:
        class FailsOnce(CallsThenAnswers):
            def send(self, request: Any) -> CompletionResponse:
                if self.calls == 0:
                    self.calls += 1
                    raise RuntimeError("boom")
                return super().send(request)

        loop = service(FailsOnce())
        conversation = create_conversation()
        failed = loop.send(conversation, "hi")
        assert failed.status == "failed"
        retried = loop.retry(failed.pk)
        # A retry is a fresh budget of attempts: this is its first.
        assert (retried.pk, retried.status, retried.attempts) == (failed.pk, "completed", 1)
        assert retried.error_message == ""
        assert [m.role for m in load_messages(conversation)] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        with pytest.raises(RunStateError) as info:
            loop.retry(retried.pk)
        assert info.value.code == "run_not_failed"


@pytest.mark.django_db(transaction=True)
class TestHeartbeat:
    def test_the_lease_is_renewed_while_a_tool_works(self, settings: Any) -> None:
        settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "LEASE_SECONDS": 1}
        seen: list[Any] = []

        @tool(name="slow")
        def slow() -> str:
            first = Run.objects.values_list("lease_expires_at", flat=True).get()
            time.sleep(1.5)
            seen.append((first, Run.objects.values_list("lease_expires_at", flat=True).get()))
            # Another process cannot take the run meanwhile.
            seen.append(claim(Run.objects.get(), new_owner()))
            return "done"

        run = service(CallsThenAnswers("slow"), slow).send(create_conversation(), "hi")
        assert run.status == "completed"
        (first, later), taken = seen
        assert later > first + timedelta(seconds=0.9)
        assert taken is False

    def test_a_cancel_from_elsewhere_stops_the_run_while_its_tool_works(
        self, settings: Any
    ) -> None:
        settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "LEASE_SECONDS": 1}
        started = threading.Event()

        @tool(name="slow")
        def slow() -> str:
            started.set()
            time.sleep(1.5)
            return "late"

        loop = service(CallsThenAnswers("slow"), slow)
        conversation = create_conversation()
        run = loop.start(conversation, "hi")
        worker = threading.Thread(target=execute_closing, args=(loop, run.pk))
        worker.start()
        assert started.wait(5)
        ToolLoopService().cancel(run.pk)
        worker.join(10)
        run.refresh_from_db()
        assert (run.status, run.termination_reason) == ("cancelled", "cancelled")
        history = load_messages(conversation)
        assert check_sequence(history) == ()
        assert [m.content for m in history if m.role == "tool"] == [
            "The run was cancelled before this tool call ran."
        ]
        types = list(RunEvent.objects.filter(run=run).values_list("type", flat=True))
        assert types[-1] == "run.cancelled"
        assert ChatMessage.tool_result("c1", "late") not in history

    @requires_postgresql
    def test_a_terminated_heartbeat_connection_keeps_the_lease(
        self, settings: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "LEASE_SECONDS": 1.5}
        heartbeat_pids: list[int] = []
        real_renew = leases._looks.renew

        def renew(every: float) -> None:
            # Only the heartbeat thread renews: note which server process serves it.
            connection.ensure_connection()
            heartbeat_pids.append(connection.connection.info.backend_pid)
            real_renew(every)

        monkeypatch.setattr(leases._looks, "renew", renew)
        terminated = threading.Event()
        executions: list[str] = []
        reaped: list[Any] = []

        @tool(name="slow")
        def slow() -> str:
            executions.append("slow")
            assert terminated.wait(10)
            # Three leases long: a lease that lapsed would be reaped meanwhile.
            for _ in range(9):
                time.sleep(0.5)
                reaped.append(reap_runs())
            return "done"

        loop = service(CallsThenAnswers("slow"), slow)
        run = loop.start(create_conversation(), "hi")
        worker = threading.Thread(target=execute_closing, args=(loop, run.pk))
        worker.start()
        deadline = time.monotonic() + 10
        while not heartbeat_pids and time.monotonic() < deadline:
            time.sleep(0.05)
        assert heartbeat_pids, "the heartbeat never renewed"
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [heartbeat_pids[0]])
            assert cursor.fetchone() == (True,)
        terminated.set()
        worker.join(30)
        run.refresh_from_db()
        assert (run.status, run.attempts) == ("completed", 1)
        assert executions == ["slow"]
        assert all(not r.requeued and not r.failed for r in reaped)
        # It reconnected: renewals went on from another server process.
        assert set(heartbeat_pids) - {heartbeat_pids[0]}

    @requires_postgresql
    def test_a_tool_result_outlives_every_session_being_terminated(self) -> None:
        # As a PostgreSQL restart would while a tool works: the loop's idle
        # connection is gone at its next query. The result in hand is stored
        # on a new connection, not lost with a failed run.
        executed: list[str] = []

        def terminate_every_other_session() -> None:
            try:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                    assert cursor.fetchone()[0] >= 1
            finally:
                connections.close_all()

        @tool(name="pay", repeatable=False)
        def pay() -> str:
            executed.append("pay")
            killer = threading.Thread(target=terminate_every_other_session)
            killer.start()
            killer.join()
            return "paid"

        loop = service(CallsThenAnswers("pay"), pay)
        conversation = create_conversation()
        worker = threading.Thread(
            target=execute_closing, args=(loop, loop.start(conversation, "pay").pk)
        )
        worker.start()
        worker.join(30)
        connection.close()  # this thread's session was terminated too
        run = Run.objects.get()
        assert (run.status, run.termination_reason, run.attempts) == ("completed", "completed", 1)
        assert executed == ["pay"]
        assert [m.content for m in load_messages(conversation) if m.role == "tool"] == ["paid"]

    @requires_postgresql
    def test_a_streamed_reply_outlives_every_session_being_terminated(self) -> None:
        # As a PostgreSQL restart would while the model streams: the loop's next
        # write, the text it logs, reconnects instead of failing the run.

        class Restarted(Provider):
            backend = "restarted"
            uses_http = False

            def send_stream(self, request: Any) -> Iterator[StreamEvent]:
                yield TextDelta("before ")
                time.sleep(0.1)  # the loop has logged it
                killer = threading.Thread(target=terminate_every_other_session)
                killer.start()
                killer.join()
                yield TextDelta("after")
                yield ResponseCompleted(CompletionResponse("before after"))

        def terminate_every_other_session() -> None:
            try:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
            finally:
                connections.close_all()

        loop = ToolLoopService(Restarted(model="r"), tools=ToolRegistry([]))
        conversation = create_conversation()
        worker = threading.Thread(
            target=execute_closing, args=(loop, loop.start(conversation, "hi").pk)
        )
        worker.start()
        worker.join(30)
        connection.close()  # this thread's session was terminated too
        run = Run.objects.get()
        assert (run.status, run.termination_reason) == ("completed", "completed")
        assert load_messages(conversation)[-1].content == "before after"
        deltas = run.events.filter(type="text.delta").values_list("data", flat=True)
        assert "".join(d["delta"] for d in deltas) == "before after"


@pytest.mark.django_db
class TestRepeats:
    @pytest.mark.parametrize(("repeatable", "runs_again"), [(True, True), (False, False)])
    def test_a_call_that_may_have_run_is_repeated_only_if_its_tool_allows(
        self, repeatable: bool, runs_again: bool
    ) -> None:
        executed: list[str] = []

        @tool(name="pay", repeatable=repeatable)
        def pay() -> str:
            executed.append("pay")
            return "paid"

        loop = service(CallsThenAnswers("pay"), pay)
        conversation = create_conversation()
        run = loop.start(conversation, "pay the bill")
        # A first worker stored the call, logged it as started, then died.
        claim(run, new_owner())
        from llm_conversations.runs.log.writer import record_live
        from llm_conversations.runs.transitions import store_reply

        store_reply(run, CompletionResponse("", (ToolCall("p1", "pay"),)))
        record_live(run, [("tool_call.started", {"tool_call": ToolCall("p1", "pay").to_wire()})])
        expire(run)
        done = loop.execute(run.pk)
        assert (done.status, done.attempts) == ("completed", 2)
        assert executed == (["pay"] if runs_again else [])
        (result,) = [m for m in load_messages(conversation) if m.role == "tool"]
        assert result.is_error is not runs_again
        if not runs_again:
            assert "not run again" in result.content


@pytest.mark.django_db
@pytest.mark.parametrize("end", ["cancel", "fail"])
def test_results_written_when_a_run_ends_are_in_its_event_log(end: str) -> None:
    from llm_conversations.models import Message, TerminationReason
    from llm_conversations.runs.transitions import finish

    guarding = service(CallsThenAnswers("guarded"), guarded)
    paused = guarding.send(create_conversation(), "hi")
    assert paused.status == "requires_action"
    if end == "cancel":
        guarding.cancel(paused.pk)
    else:
        finish(paused, RunStatus.FAILED, TerminationReason.ERROR, RuntimeError("x"))
    events = list(RunEvent.objects.filter(run=paused).values_list("type", "data"))
    (result,) = Message.objects.filter(run=paused, role="tool")
    assert events[-2] == ("tool_result.stored", {"message": str(result.pk)})
    assert events[-1][0] == ("run.cancelled" if end == "cancel" else "run.failed")


def test_a_database_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import OperationalError

    monkeypatch.setattr(leases, "CHECK_SECONDS", 0.01)
    # Five looks with the database away, then it answers again.
    looks = iter([OperationalError("gone")] * 5 + [False] * 1000)

    def lost(self: leases.Heartbeat, due: bool) -> bool:
        outcome = next(looks)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(leases.Heartbeat, "_lost", lost)
    with (
        caplog.at_level("INFO", logger="llm_conversations.leases"),
        leases.Heartbeat(Run(pk=7)),
    ):
        deadline = time.monotonic() + 5
        while len(caplog.records) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # more looks, all fine: nothing more to say
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0] == "Renewing the lease of run 7 failed (OperationalError); retrying"
    assert messages[1].startswith("Renewing the lease of run 7 works again after ")
    assert messages[1].endswith(" s")


def claimed_runs(count: int) -> list[Run]:
    """``count`` runs, each claimed by an owner of its own, as a worker's would be."""
    runs = []
    for _ in range(count):
        run = service(CallsThenAnswers("noop"), noop).start(create_conversation(), "hi")
        assert claim(run, new_owner())
        runs.append(run)
    return runs


@contextmanager
def heartbeats_recording(runs: list[Run], prefix: str) -> Iterator[tuple[list[Any], list[str]]]:
    """Heartbeats of ``runs`` for the block, and the statements on the run table
    starting with ``prefix`` that connections opened meanwhile (theirs) sent."""
    from django.db.backends.signals import connection_created

    sent: list[str] = []

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if sql.startswith(prefix) and '"llm_conversations_run"' in sql:
            sent.append(sql)
        return execute(sql, params, many, context)

    def counted(sender: Any, connection: Any, **kwargs: Any) -> None:
        connection.execute_wrappers.append(count)

    connection_created.connect(counted)
    heartbeats = [leases.Heartbeat(run) for run in runs]
    try:
        for heartbeat in heartbeats:
            heartbeat.__enter__()
        yield heartbeats, sent
    finally:
        for heartbeat in heartbeats:
            heartbeat.__exit__(None, None, None)
        connection_created.disconnect(counted)


@pytest.mark.django_db(transaction=True)
def test_the_heartbeats_of_a_process_look_at_their_runs_in_one_query() -> None:
    runs = claimed_runs(10)
    with heartbeats_recording(runs, "SELECT") as (heartbeats, looks):
        time.sleep(2.6)  # two looks of each heartbeat: 20 queries, one per run and look
        ToolLoopService().cancel(runs[3].pk)
        deadline = time.monotonic() + 3
        while not heartbeats[3].lost.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert heartbeats[3].lost.is_set()  # a cancel is still seen
    assert not any(h.lost.is_set() for i, h in enumerate(heartbeats) if i != 3)
    # One query a look for all ten (a few more if their looks drift apart), not
    # one per heartbeat and look (30 and more).
    assert 1 <= len(looks) <= 12, looks


@pytest.mark.django_db(transaction=True)
def test_the_heartbeats_of_a_process_renew_their_leases_in_one_update(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "LEASE_SECONDS": 1.5}
    runs = claimed_runs(10)
    claimed_until = {
        r.pk: r.lease_expires_at for r in Run.objects.filter(pk__in=[r.pk for r in runs])
    }
    with heartbeats_recording(runs, "UPDATE") as (heartbeats, renewals):
        # Each heartbeat is due every 0.5 s: about 50 renewals one by one.
        time.sleep(2.6)
    assert not any(h.lost.is_set() for h in heartbeats)
    renewed = dict(Run.objects.filter(pk__in=claimed_until).values_list("pk", "lease_expires_at"))
    assert all(renewed[pk] > until for pk, until in claimed_until.items()), (renewed, claimed_until)
    # One update renews all ten (a few more if their beats drift apart).
    assert 1 <= len(renewals) <= 12, renewals
