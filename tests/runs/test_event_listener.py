"""Waking readers of run events: the process's one LISTEN (PostgreSQL) and local wake-ups."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from django.db import connection, connections, transaction

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Run, RunEvent, RunEventType
from llm_conversations.runs.log import followers
from llm_conversations.runs.log.listener import CHANNEL, EventListener, from_payload, listener
from llm_conversations.runs.log.pushes import Pushed
from llm_conversations.runs.log.writer import record

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="LISTEN/NOTIFY is PostgreSQL's"
)


def make_run() -> Run:
    return Run.objects.create(conversation=create_conversation(), status="running")


def listening_connections(of: EventListener) -> int:
    """How many sessions listen for ``of`` (the process's own listener may listen
    too, for a reader another test left)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND query = %s AND application_name = %s",
            [f"LISTEN {CHANNEL}", of.application_name],
        )
        (count,) = cursor.fetchone()
    return int(count)


def eventually(check: object, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(check) and check():
            return True
        time.sleep(0.02)
    return False


def insert_event_elsewhere(run: Run) -> None:
    """Log an event from another connection, as a worker process would."""

    def work() -> None:
        try:
            with transaction.atomic():
                record(run, [(RunEventType.TEXT_DELTA, {"delta": "x"})])
        finally:
            connections.close_all()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


@pytest.fixture
def fresh_listener() -> EventListener:
    """A listener of the test's own, so local wake-ups of ``record`` do not reach it."""
    return EventListener()


@pytest.mark.django_db
def test_a_committed_event_wakes_this_process_readers_of_its_run_only_after_commit(
    django_capture_on_commit_callbacks: Any,
) -> None:
    run, other = make_run(), make_run()
    with listener.subscribe(run.pk) as waiter, listener.subscribe(other.pk) as bystander:
        if connection.vendor == "postgresql":
            # Listening starts by waking every reader (something may have been missed).
            assert eventually(lambda: listener.listening)
            waiter.clear()
            bystander.clear()
        with django_capture_on_commit_callbacks(execute=True):
            record(run, [(RunEventType.TEXT_DELTA, {"delta": "x"})])
            assert not waiter.wait(0)  # not before the commit
        assert waiter.wait(0)
        assert not bystander.wait(0)


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_one_connection_wakes_all_readers_of_a_run_elsewhere_and_closes_when_they_leave(
    fresh_listener: EventListener,
) -> None:
    runs = [make_run() for _ in range(5)]
    subscriptions = [fresh_listener.subscribe(run.pk) for run in runs]
    waiters = [s.__enter__() for s in subscriptions]
    try:
        assert eventually(lambda: fresh_listener.listening)
        assert listening_connections(fresh_listener) == 1
        for waiter in waiters:
            waiter.clear()
        started = time.monotonic()
        insert_event_elsewhere(runs[2])
        assert waiters[2].wait(5)
        assert time.monotonic() - started < 1.0  # woken by the notification, not a poll
        assert not any(w.wait(0) for i, w in enumerate(waiters) if i != 2)
    finally:
        for subscription in subscriptions:
            subscription.__exit__(None, None, None)
    assert eventually(lambda: listening_connections(fresh_listener) == 0)
    assert not fresh_listener.listening


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_local_reader_listens_on_no_connection_and_takes_no_wake_ups(
    fresh_listener: EventListener,
) -> None:
    run = make_run()
    with fresh_listener.subscribe(run.pk, local=True) as local:
        assert not eventually(lambda: fresh_listener.listening, seconds=0.3)
        assert listening_connections(fresh_listener) == 0
        with fresh_listener.subscribe(run.pk) as woken:
            assert eventually(lambda: fresh_listener.listening)
            fresh_listener.wake(run.pk)
            assert woken.take() == ([], True)
            assert local.take() == ([], False)  # listening started: not its concern
        # The last reader that listens left: the connection closes though a local one stays.
        assert eventually(lambda: listening_connections(fresh_listener) == 0)
        rows = record(run, [(RunEventType.TEXT_DELTA, {"delta": "x"})])
        fresh_listener.publish(Pushed(str(run.pk), None, rows))
        assert local.take() == ([Pushed(str(run.pk), None, rows)], False)


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_lost_listening_connection_wakes_every_reader_and_listens_again(
    fresh_listener: EventListener,
) -> None:
    run = make_run()
    with fresh_listener.subscribe(run.pk) as waiter:
        assert eventually(lambda: fresh_listener.listening)
        waiter.clear()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE query = %s AND application_name = %s",
                [f"LISTEN {CHANNEL}", fresh_listener.application_name],
            )
        assert waiter.wait(5)  # readers read again: something may have been missed
        assert eventually(lambda: listening_connections(fresh_listener) == 1)
        assert eventually(lambda: fresh_listener.listening)
        waiter.clear()
        insert_event_elsewhere(run)
        assert waiter.wait(5)


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_the_writer_notifies_each_batch_with_its_events() -> None:
    import psycopg

    run = make_run()
    params = dict(connection.get_connection_params())
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as listening:
        listening.execute(f"LISTEN {CHANNEL}")
        insert_event_elsewhere(run)
        insert_event_elsewhere(run)
        payloads = [n.payload for n in listening.notifies(timeout=5, stop_after=2)]
    first, second = (from_payload(payload, "another process") for payload in payloads)
    assert first is not None
    assert second is not None
    logged = list(RunEvent.objects.filter(run=run).order_by("id"))
    assert [e.id for e in first.events + second.events] == [e.id for e in logged]
    assert [(e.type, e.data) for e in first.events] == [("text.delta", {"delta": "x"})]
    assert first.events[0].created_at == logged[0].created_at
    # The first writer did not know the log before it (a reader reads it then); the
    # second, the same run's instance, knows it follows the first.
    assert (first.run_id, first.after, second.after) == (str(run.pk), None, logged[0].id)
    # The listener that published a batch in process skips its own notification.
    assert from_payload(payloads[0], listener.origin) is None


@pytest.mark.django_db(transaction=True)
def test_an_async_follower_is_woken_from_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # The loop's pool threads close their connections after each read, as with
    # CONN_MAX_AGE 0 (kept otherwise, and this test's loop ends with its threads).
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    run = make_run()
    got: list[int] = []

    async def follow() -> None:
        async for page in followers.afollow(run.pk, 0):
            assert page is not None
            got.extend(e.id for e in page.events)
            if len(got) == 2:
                return

    def write_later() -> None:
        time.sleep(0.3)
        insert_event_elsewhere(run)
        time.sleep(0.3)
        with transaction.atomic():
            record(run, [(RunEventType.RUN_COMPLETED, {})])
        connections.close_all()

    writer = threading.Thread(target=write_later)
    writer.start()
    started = time.monotonic()
    asyncio.run(follow())
    writer.join()
    assert len(got) == 2
    assert time.monotonic() - started < 2.0


def test_the_last_reader_leaving_after_the_listening_thread_ended_is_no_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The listening thread closes its end of the wake-up pair as it stops; one that saw
    the stop first (waiting to listen again after a lost connection) may have closed it
    before the last reader leaves, whose wake-up then finds no one: no BrokenPipeError."""
    ended = threading.Event()

    def ends_at_once(*args: Any) -> None:
        wakeup = args[3]
        wakeup.close()
        ended.set()

    monkeypatch.setattr("llm_conversations.runs.log.listener.listen", ends_at_once)
    monkeypatch.setattr("llm_conversations.runs.log.listener._uses_notify", lambda: True)
    fresh = EventListener()
    with fresh.subscribe("a-run"):
        assert ended.wait(5)
    assert not fresh.listening
    assert fresh._thread is None
