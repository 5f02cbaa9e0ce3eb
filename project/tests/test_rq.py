"""The scale-out path: background runs on two RQ worker processes, Redis as the broker.

Each worker is ``manage.py rqworker`` (django-rq) on the demo's settings with
``DJANGO_TASKS=rq``, running jobs in its own process (``SimpleWorker``, so a
lease owner's pid is the worker's). The workers are separate processes, so the
test needs a database they can share: PostgreSQL (``DATABASE_URL``); on SQLite
it skips. Without Redis at ``RQ_TEST_REDIS_URL`` (default 127.0.0.1:6379, a
database number of its own) it skips locally and fails under ``CI=true``, like
the browser tests (tests/browser/chromium.py).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import pytest
from django.db import connection
from django.test import override_settings

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Conversation, Run, RunEvent, RunEventType
from llm_conversations.runs import ToolLoopService
from tests.browser.chromium import running_under_ci

pytestmark = [pytest.mark.rq, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
RUNS = 10
WAIT_SECONDS = 60
# A Redis database of this test's own, away from other users of the server.
REDIS_URL = os.environ.get("RQ_TEST_REDIS_URL") or f"redis://127.0.0.1:6379/{1 + os.getpid() % 15}"
CLAIMED = re.compile(r"Run ([0-9a-f-]{36}) claimed by (\S+):(\d+):\w+ \(attempt (\d+)\)")


def redis_problem(url: str) -> str | None:
    """Why Redis cannot be used at ``url``, or None."""
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception as exc:
        return f"Redis not reachable at {url} ({exc}); start redis-server"
    return None


def database_url() -> str:
    """The test database, as the worker processes' ``DATABASE_URL``."""
    db = connection.settings_dict
    user = quote(db["USER"] or "")
    password = f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def rq_settings() -> Iterator[None]:
    if connection.vendor != "postgresql":
        pytest.skip(
            "RQ workers are separate processes and cannot see SQLite's in-memory test "
            "database; run with DATABASE_URL=postgres://... to include this test"
        )
    problem = redis_problem(REDIS_URL)
    if problem and running_under_ci(os.environ):
        pytest.fail(f"{problem}. CI=true: the RQ test may not be skipped.")
    if problem:
        pytest.skip(f"{problem} (skipped locally; under CI=true this fails)")
    with override_settings(
        RQ_QUEUES={"default": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 1800}},
        TASKS={"default": {"BACKEND": "django_tasks_rq.RQBackend", "QUEUES": ["default"]}},
    ):
        yield


def start_worker(name: str, log: IO[str]) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DJANGO_TASKS": "rq",
        "REDIS_URL": REDIS_URL,
        "DATABASE_URL": database_url(),
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "rqworker",
            "default",
            "--worker-class",
            "rq.worker.SimpleWorker",
            "--name",
            name,
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def stop(workers: list[subprocess.Popen[str]]) -> None:
    """SIGTERM (RQ's warm shutdown), then SIGKILL to each worker's process group."""
    for worker in workers:
        with suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for worker in workers:
        with suppress(subprocess.TimeoutExpired):
            worker.wait(max(0.1, deadline - time.monotonic()))
        with suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


def wait_for(condition: Any, what: str, logs: list[Path], seconds: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            output = "\n".join(f"--- {log.name}\n{log.read_text()}" for log in logs)
            pytest.fail(f"timed out after {seconds:g} s waiting for {what}\n{output}")
        time.sleep(0.2)


def runs_ended(ids: list[uuid.UUID]) -> bool:
    """True once none of the runs ``ids`` is still active."""
    ended = ["completed", "failed", "cancelled"]
    return not Run.objects.filter(pk__in=ids).exclude(status__in=ended).exists()


def assert_each_completed_once(ids: list[uuid.UUID], conversations: list[Conversation]) -> None:
    """Every run completed on its first attempt and ran once; every conversation is a
    valid user/assistant pair."""
    for run in Run.objects.filter(pk__in=ids):
        assert (run.status, run.termination_reason, run.attempts) == ("completed", "completed", 1)
    running_events = Counter(
        RunEvent.objects.filter(run__in=ids, type=RunEventType.RUN_RUNNING).values_list(
            "run_id", flat=True
        )
    )
    assert running_events == dict.fromkeys(ids, 1)
    for conversation in conversations:
        history = load_messages(conversation)
        assert [m.role for m in history] == ["user", "assistant"]
        assert check_sequence(history) == ()


def test_two_rq_workers_complete_each_run_exactly_once(rq_settings: None, tmp_path: Path) -> None:
    import django_rq
    from rq import Worker

    queue = django_rq.get_queue("default")
    redis = django_rq.get_connection("default")
    queue.empty()
    names = [f"llmconv-test-{uuid.uuid4().hex[:8]}-{n}" for n in (1, 2)]
    logs = [tmp_path / f"{name}.log" for name in names]
    files = [log.open("w") for log in logs]
    workers: list[subprocess.Popen[str]] = []
    started = time.monotonic()
    try:
        workers = [start_worker(name, file) for name, file in zip(names, files, strict=True)]

        def both_listening() -> bool:
            for worker in workers:
                assert worker.poll() is None, "a worker exited:\n" + "\n".join(
                    log.read_text() for log in logs
                )
            ready = {w.name for w in Worker.all(connection=redis) if w.get_state() == "idle"}
            return set(names) <= ready

        # Both wait on the queue before the first run is queued, so both get work.
        wait_for(both_listening, "both workers to listen", logs)

        conversations = [create_conversation(title=f"rq {n}") for n in range(RUNS)]
        runs = [
            ToolLoopService().start(conversation, f"hello {n}", background=True)
            for n, conversation in enumerate(conversations)
        ]
        ids = [run.pk for run in runs]

        wait_for(partial(runs_ended, ids), f"{RUNS} runs to end", logs)
        elapsed = time.monotonic() - started
    finally:
        stop(workers)
        for file in files:
            file.close()
        queue.empty()

    assert all(worker.poll() is not None for worker in workers)
    assert_each_completed_once(ids, conversations)

    # Each worker logged the runs it claimed, with its lease owner (host:pid:id).
    claims: dict[uuid.UUID, list[int]] = {}
    per_worker: dict[int, int] = {}
    for worker, log in zip(workers, logs, strict=True):
        for run_id, _host, pid, attempt in CLAIMED.findall(log.read_text()):
            assert (int(pid), attempt) == (worker.pid, "1")
            claims.setdefault(uuid.UUID(run_id), []).append(int(pid))
            per_worker[worker.pid] = per_worker.get(worker.pid, 0) + 1
    assert sorted(claims) == sorted(ids)
    assert all(len(pids) == 1 for pids in claims.values())
    assert set(per_worker) == {worker.pid for worker in workers}, per_worker
    print(f"{RUNS} runs on 2 RQ workers in {elapsed:.1f} s: {per_worker}")
