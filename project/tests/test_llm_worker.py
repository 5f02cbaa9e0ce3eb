"""``manage.py llm_worker``: many runs at once in one worker process, picked up as committed.

Each test starts real worker processes (``project.tests.worker_settings``) on
the test database (a file on SQLite, see conftest) against a fake provider on
127.0.0.1 that answers after a delay, then SIGKILLs or SIGTERMs them.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.db import connection
from django_tasks_db.models import DBTaskResult

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.models import Run, RunStatus
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.reaper import reap_runs
from project.tests.slow_provider import SlowProvider, assert_finished_without_charging_twice
from project.tests.worker_tools import LEASE_SECONDS
from tests.conftest import requires_postgresql

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
POOL = 4  # connections per worker process on PostgreSQL
WAIT_SECONDS = 60


class Worker:
    """One ``llm_worker`` process and its log."""

    def __init__(self, tmp_path: Path, name: str, provider_url: str, *args: str) -> None:
        self.log = tmp_path / f"{name}.log"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.tests.worker_settings",
            "DATABASE_URL": database_url(),
            "DJANGO_DB_POOL": str(POOL),
            "WORKER_PROVIDER_URL": provider_url,
            "WORKER_TOOL_LOG": str(tmp_path / "charged.log"),
            "PYTHONUNBUFFERED": "1",
        }
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "manage.py",
                    "llm_worker",
                    "--no-reload",
                    "--no-startup-delay",
                    *args,
                ],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def signal(self, signum: int) -> None:
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def stop(self) -> None:
        self.signal(signal.SIGKILL)
        self.process.wait()


def database_url() -> str:
    """The test database, as the worker processes' ``DATABASE_URL``."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = quote(db["USER"] or "")
    password = f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def workers(tmp_path: Path, provider: SlowProvider) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(*args: str) -> Worker:
        worker = Worker(tmp_path, f"worker{len(started)}", provider.base_urls()["openai"], *args)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def wait_for(condition: Callable[[], Any], what: str, workers: list[Worker]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {w.log.name}\n{w.log.read_text()}" for w in workers)
            pytest.fail(f"timed out waiting for {what}\n{logs}")
        time.sleep(0.05)


def start_runs(count: int, text: str = "hello") -> list[Run]:
    service = ToolLoopService()
    return [
        service.start(create_conversation(title=f"c{i}"), text, background=True)
        for i in range(count)
    ]


def ended(runs: list[Run]) -> bool:
    return not Run.objects.filter(pk__in=[r.pk for r in runs]).exclude(
        status__in=[RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED]
    )


def listening() -> bool:
    """Whether a worker listens for queued tasks on the test database (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE 'LISTEN llm_conversations_tasks%%'"
        )
        return cursor.fetchone() is not None


def other_connections() -> int:
    """Sessions on the test database other than this process's."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def test_one_worker_executes_many_runs_at_once(
    provider: SlowProvider, workers: Callable[..., Worker]
) -> None:
    worker = workers("--concurrency", "32")
    runs = start_runs(20)
    began = time.monotonic()
    peak = 0
    while not ended(runs):
        if connection.vendor == "postgresql":
            peak = max(peak, other_connections())
        assert time.monotonic() - began < WAIT_SECONDS, worker.log.read_text()
        time.sleep(0.05)
    took = time.monotonic() - began
    # One after another, 20 runs of a 1 s model call take 20 s.
    assert took < 10, f"20 runs took {took:.1f} s"
    assert set(Run.objects.values_list("status", flat=True)) == {RunStatus.COMPLETED}
    for run in runs:
        assert [m.role for m in load_messages(run.conversation_id)] == ["user", "assistant"]
    if connection.vendor == "postgresql":
        # 20 runs and their heartbeats in flight, yet no more than the pool and
        # the listening connection (about 40 without the pool).
        assert 0 < peak <= POOL + 1


@requires_postgresql
def test_a_queued_run_is_claimed_as_it_is_committed(
    provider: SlowProvider, workers: Callable[..., Worker]
) -> None:
    provider.delay = 0.0
    worker = workers()  # its poll, the fallback, is 5 s
    wait_for(listening, "the worker to listen", [worker])
    delays = []
    for _ in range(20):
        (run,) = start_runs(1)
        wait_for(lambda run=run: ended([run]), "the run", [worker])
        task = DBTaskResult.objects.get(args_kwargs__args=[str(run.pk)])
        assert task.started_at is not None
        delays.append((task.started_at - task.enqueued_at).total_seconds())
    p95 = statistics.quantiles(delays, n=20)[-1]
    assert p95 < 0.2, f"pick-up p95 {p95 * 1000:.0f} ms: {delays}"


def test_a_killed_workers_run_is_finished_by_another_without_repeating_a_tool(
    provider: SlowProvider, workers: Callable[..., Worker], tmp_path: Path
) -> None:
    provider.delay = 0.1
    charged = tmp_path / "charged.log"
    first = workers()
    (run,) = start_runs(1, "please pay")
    wait_for(charged.exists, "the tool to start", [first])
    first.signal(signal.SIGKILL)  # mid-tool: the call may have had its effect
    first.process.wait()
    time.sleep(LEASE_SECONDS + 0.5)
    assert reap_runs().requeued == (run.pk,)
    second = workers()
    wait_for(lambda: ended([run]), "the run to end", [first, second])
    assert_finished_without_charging_twice(run, charged)


def test_sigterm_lets_the_runs_in_flight_finish(
    provider: SlowProvider, workers: Callable[..., Worker]
) -> None:
    provider.delay = 2.0
    worker = workers("--concurrency", "8")
    runs = start_runs(3)
    wait_for(lambda: Run.objects.filter(status=RunStatus.RUNNING).count() == 3, "runs", [worker])
    worker.signal(signal.SIGTERM)
    assert worker.process.wait(timeout=WAIT_SECONDS) == 0, worker.log.read_text()
    assert set(Run.objects.values_list("status", flat=True)) == {RunStatus.COMPLETED}
    assert len(runs) == 3
