"""Runs on a worker engine of the demo, followed live by its clients.

``engine`` starts one engine's worker process on the test database against the
fake provider (``manage.py llm_worker``, or on PostgreSQL a Celery worker on
Redis), with ``BACKGROUND_RUNS`` on, so the demo's pages and the API
start every run there. ``story`` makes the provider stream ``STORY`` a piece at
a time and halt after each piece but the last until the test lets it go on
(:meth:`Story.go_on`): text a client shows meanwhile reached it while the model
was still writing, before the run could end.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from llm_conversations.models import Run, RunEvent, RunEventType, RunStatus
from project.tests.slow_provider import SlowProvider
from project.tests.test_celery import celery_broker, start_worker
from project.tests.test_llm_worker import Worker, listening
from project.tests.test_llm_worker import wait_for as wait_for_worker
from project.tests.test_rq import stop
from project.tests.test_rq import wait_for as wait_for_logs
from tests.faults.wire import pieces

__all__ = [
    "FIRST_PIECE_SECONDS",
    "PIECES",
    "STORY",
    "Story",
    "assert_told_once",
    "engine",
    "logged_text",
    "story",
    "wait_until",
    "wherever",
]

STORY = "Once upon a time, a worker streamed every word as the model wrote it."
PIECES = pieces(STORY)
# The first piece may wait for a worker process to start (Django's imports).
FIRST_PIECE_SECONDS = 30
PACE_SECONDS = 0.05

# Celery workers need a database other processes share: on SQLite only llm_worker
# runs (a skipped browser test would fail a CI run, see tests/browser/chromium.py).
ENGINES: list[Any] = ["llm_worker"]
if connection.vendor == "postgresql":
    ENGINES.append(pytest.param("celery", marks=pytest.mark.celery))


class Story:
    """``STORY``, streamed by the fake provider a piece at a time (a piece per event
    after the first, which names the role), halting after each piece but the last."""

    def __init__(self, provider: SlowProvider) -> None:
        self.provider = provider
        self.holds = [threading.Event() for _ in PIECES[:-1]]
        provider.delay = 0.0
        provider.text = STORY
        provider.pace = PACE_SECONDS
        provider.holds = {n + 1: hold for n, hold in enumerate(self.holds)}

    @staticmethod
    def told(pieces: int) -> str:
        """The text of the first ``pieces`` pieces."""
        return "".join(PIECES[:pieces])

    def go_on(self) -> None:
        """Let the stream go on to its next halt (or to its end)."""
        next(hold for hold in self.holds if not hold.is_set()).set()

    def release(self) -> None:
        for hold in self.holds:
            hold.set()


@pytest.fixture
def story(provider: SlowProvider) -> Iterator[Story]:
    told = Story(provider)
    yield told
    told.release()


def logged_text(run: Run) -> str:
    """The text the run's log holds so far."""
    deltas = RunEvent.objects.filter(run=run, type=RunEventType.TEXT_DELTA).order_by("id")
    return "".join(event.data["delta"] for event in deltas)


def wait_until(condition: Callable[[], object], seconds: float = 10) -> None:
    """Wait for ``condition`` to hold, looking every 10 ms."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {seconds:g} s"
        time.sleep(0.01)


def assert_told_once(provider: SlowProvider, run: Run) -> None:
    """The run completed with ``STORY`` from one streamed request (its one round), and
    its log's text is the stored answer."""
    run.refresh_from_db()
    assert (run.status, run.iterations) == (RunStatus.COMPLETED, 1)
    assert [seen.stream for seen in provider.requests] == [True]
    answer = run.messages.get(role="assistant")
    assert logged_text(run) == answer.content == STORY


@contextmanager
def _llm_worker(tmp_path: Path, provider: SlowProvider) -> Iterator[None]:
    worker = Worker(tmp_path, "llm_worker", provider.base_urls()["openai"])
    try:
        if connection.vendor == "postgresql":
            # Queued runs are pushed to it once it listens (its poll is 5 s).
            wait_for_worker(listening, "the worker to listen", [worker])
        yield
    finally:
        worker.stop()


@contextmanager
def _celery_worker(tmp_path: Path, provider: SlowProvider) -> Iterator[None]:
    log = tmp_path / "celery.log"
    extra = {
        "DJANGO_SETTINGS_MODULE": "project.tests.worker_settings",
        "WORKER_PROVIDER_URL": provider.base_urls()["openai"],
        "WORKER_TOOL_LOG": str(tmp_path / "charged.log"),
    }
    with celery_broker(), log.open("w") as file:
        workers = [start_worker(f"llmconv-live-{uuid.uuid4().hex[:8]}", file, **extra)]
        try:

            def ready() -> bool:
                assert workers[0].poll() is None, log.read_text()
                return " ready." in log.read_text()

            wait_for_logs(ready, "the Celery worker", [log])
            yield
        finally:
            stop(workers)


@contextmanager
def _executing(where: str, tmp_path: Path, provider: SlowProvider, settings: Any) -> Iterator[str]:
    if where == "request":
        yield where  # the demo's own setting: the request that starts a run executes it
        return
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "BACKGROUND_RUNS": True}
    start = _llm_worker if where == "llm_worker" else _celery_worker
    with start(tmp_path, provider):
        yield where


@pytest.fixture(params=ENGINES)
def engine(
    request: pytest.FixtureRequest, provider: SlowProvider, tmp_path: Path, settings: Any
) -> Iterator[str]:
    """The worker engine (its name) that executes every run the test starts."""
    with _executing(request.param, tmp_path, provider, settings) as where:
        yield where


@pytest.fixture(params=["request", *ENGINES])
def wherever(
    request: pytest.FixtureRequest, provider: SlowProvider, tmp_path: Path, settings: Any
) -> Iterator[str]:
    """Where every run the test starts executes: in its request, or on a worker engine."""
    with _executing(request.param, tmp_path, provider, settings) as where:
        yield where
