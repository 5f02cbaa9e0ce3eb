"""What the engine logs reaches followers by push: no query per event per reader.

A follower reads the log when it starts, when a push does not continue where
it stands, and for what a push lacks (the run, for ``run.*`` events); the text
of a reply, however many pieces, costs it nothing. Tested with real threads
and, on PostgreSQL, a writer in another process (``NOTIFY`` payloads).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from llm_conversations.conversations import create_conversation
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.models import Run, RunEvent, RunEventType
from llm_conversations.providers import Provider, ResponseCompleted, StreamEvent, TextDelta
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.log import followers, writer
from llm_conversations.runs.log.pushes import Pushed, Waiter
from tests.conftest import requires_postgresql

ROOT = Path(__file__).resolve().parent.parent.parent


class Pieces(Provider):
    """Streams its answer as ``PIECES`` pieces, a little apart, so each is logged alone."""

    backend = "pieces"
    uses_http = False
    pieces = 5

    def send_stream(self, request: Any) -> Iterator[StreamEvent]:
        for index in range(self.pieces):
            time.sleep(0.005)
            yield TextDelta(f"p{index} ")
        text = "".join(f"p{index} " for index in range(self.pieces))
        yield ResponseCompleted(CompletionResponse(text))


def executed_elsewhere(pieces: int) -> tuple[Run, threading.Thread]:
    """A run started here and executed on another thread, as a worker would."""
    provider = Pieces(model="p")
    provider.pieces = pieces
    loop = ToolLoopService(provider)
    run = loop.start(create_conversation(), "count")

    def execute() -> None:
        try:
            time.sleep(0.2)  # the follower has subscribed and read the empty log
            loop.execute(run.pk)
        finally:
            connections.close_all()

    return run, threading.Thread(target=execute)


def followed(run: Run, worker: threading.Thread) -> tuple[list[RunEvent], CaptureQueriesContext]:
    """Every event a follower of ``run`` got, and the queries it made."""
    got: list[RunEvent] = []
    with CaptureQueriesContext(connection) as queries:
        worker.start()
        for page in followers.follow(run.pk, 0):
            if page is not None:
                got.extend(page.events)
    worker.join()
    return got, queries


@pytest.fixture
def each_piece_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer, "TEXT_FLUSH_SECONDS", 0.0)
    # No poll while a test counts what following costs (SQLite has no NOTIFY:
    # its followers poll for other processes' writes).
    monkeypatch.setattr(followers, "POLL_SECONDS", 30.0)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("each_piece_logged")
def test_a_followers_queries_do_not_grow_with_the_text_it_receives() -> None:
    counts = {}
    for pieces in (4, 40):
        run, worker = executed_elsewhere(pieces)
        got, queries = followed(run, worker)
        counts[pieces] = reads(queries)
        logged = list(RunEvent.objects.filter(run=run).order_by("id"))
        assert [e.id for e in got] == [e.id for e in logged]  # none lost, none twice
        assert sum(e.type == RunEventType.TEXT_DELTA for e in got) == pieces
        text = "".join(e.data["delta"] for e in got if e.type == RunEventType.TEXT_DELTA)
        assert text == run.messages.get(role="assistant").content
    # The start (events, run), then for what pushes lack: the same for 4 pieces as for 40.
    assert counts[4] == counts[40]


def reads(queries: CaptureQueriesContext) -> int:
    """The statements that read (a NOTIFY is sent with a SELECT too)."""
    return sum(
        q["sql"].startswith("SELECT") and "pg_notify" not in q["sql"]
        for q in queries.captured_queries
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("each_piece_logged")
def test_an_in_request_stream_reads_nothing_for_the_text_it_sends(
    django_user_model: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rest_framework.test import APIClient

    user = django_user_model.objects.create_user("pia")
    client = APIClient()
    client.force_authenticate(user)
    settings.LLM_CONVERSATIONS = {
        "PROVIDERS": {"pieces": {"BACKEND": "tests.runs.test_pushed_events.Pieces", "MODEL": "p"}},
        "DEFAULT_PROVIDER": "pieces",
    }
    counts = {}
    for pieces in (4, 40):
        monkeypatch.setattr(Pieces, "pieces", pieces)
        url = f"/api/conversations/{create_conversation(owner=user).pk}/runs/"
        response = client.post(url, {"message": "count", "stream": True}, format="json")
        with CaptureQueriesContext(connection) as queries:
            body = b"".join(response.streaming_content)
        counts[pieces] = reads(queries)
        assert body.count(b"event: text.delta") == pieces
    # The execution writes each piece (one transaction each); the stream sends each
    # as its write pushed it, reading nothing for it.
    assert counts[4] == counts[40]


def batch(run_id: str, after: int | None, *ids: int) -> Pushed:
    events = [RunEvent(id=i, run_id=run_id, type="text.delta", data={"delta": "x"}) for i in ids]
    return Pushed(run_id, after, events)


def test_a_push_is_taken_only_where_it_continues_the_log() -> None:
    cursor = followers._Cursor(10, None)
    waiter = Waiter("r")
    waiter.push(batch("r", 10, 11, 12))
    waiter.push(batch("r", 12, 13))
    taken, read = cursor.take(waiter)
    assert ([b.last_id for b in taken], read) == ([12, 13], False)
    # One that overtook another, or whose writer did not know the log: read instead.
    cursor.after_id = 13
    waiter.push(batch("r", 14, 15))
    assert cursor.take(waiter) == ([], True)
    waiter.push(batch("r", None, 16))
    assert cursor.take(waiter) == ([], True)
    # What a read already held is skipped.
    cursor.after_id = 16
    waiter.push(batch("r", 14, 15, 16))
    assert cursor.take(waiter) == ([], False)


def test_a_waiter_that_falls_behind_reads_the_log() -> None:
    waiter = Waiter("r")
    for index in range(300):
        waiter.push(batch("r", index, index + 1))
    assert waiter.take() == ([], True)


@requires_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_follower_takes_what_another_process_logs_from_its_notifications() -> None:
    run = Run.objects.create(conversation=create_conversation(), status="running")
    with transaction.atomic():
        writer.record(run, [(RunEventType.RUN_RUNNING, {"attempt": 1})])
    name = connection.settings_dict["NAME"]
    script = f"""
import django, os, sys, time
django.setup()
from django.db import transaction
from llm_conversations.models import Run, RunEventType
from llm_conversations.runs.log import writer
run = Run.objects.get(pk="{run.pk}")
writer.knows_log(run, {run.events.get().id})
time.sleep(0.5)
for index in range(30):
    with transaction.atomic():
        Run.objects.select_for_update().get(pk=run.pk)
        writer.record(run, [(RunEventType.TEXT_DELTA, {{"delta": str(index)}})])
with transaction.atomic():
    writer.record(run, [(RunEventType.RUN_COMPLETED, {{}})])
"""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{name}",
    }
    writing = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=environment)
    got: list[RunEvent] = []
    try:
        with CaptureQueriesContext(connection) as queries:
            for page in followers.follow(run.pk, 0):
                if page is not None:
                    got.extend(page.events)
    finally:
        assert writing.wait(30) == 0
    assert [e.id for e in got] == list(run.events.order_by("id").values_list("id", flat=True))
    deltas = [e.data["delta"] for e in got if e.type == RunEventType.TEXT_DELTA]
    assert deltas == [str(index) for index in range(30)]
    # The start (events, run), then the run for run.completed: 30 pieces cost nothing.
    assert reads(queries) <= 5, json.dumps([q["sql"][:80] for q in queries.captured_queries])


@requires_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_follower_outlives_its_sessions_being_terminated_and_sees_the_end() -> None:
    # As a PostgreSQL restart would: every other session (the follower's, its
    # listener's) is terminated between two of the writer's events.
    run = Run.objects.create(conversation=create_conversation(), status="running")
    name = connection.settings_dict["NAME"]
    script = f"""
import django, time
django.setup()
from django.db import connection, transaction
from llm_conversations.models import Run, RunEventType
from llm_conversations.runs.log import writer
run = Run.objects.get(pk="{run.pk}")
time.sleep(0.5)
with transaction.atomic():
    writer.record(run, [(RunEventType.TEXT_DELTA, {{"delta": "before "}})])
time.sleep(0.3)
with connection.cursor() as cursor:
    cursor.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
time.sleep(0.3)
with transaction.atomic():
    writer.record(run, [(RunEventType.TEXT_DELTA, {{"delta": "after"}})])
    Run.objects.filter(pk=run.pk).update(status="completed")
    writer.record(run, [(RunEventType.RUN_COMPLETED, {{}})])
"""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{name}",
    }
    writing = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=environment)
    got: list[RunEvent] = []
    try:
        for page in followers.follow(run.pk, 0):
            if page is not None:
                got.extend(page.events)
    finally:
        assert writing.wait(30) == 0
        connection.close()
    assert [e.type for e in got] == ["text.delta", "text.delta", "run.completed"]
    assert "".join(e.data.get("delta", "") for e in got) == "before after"
