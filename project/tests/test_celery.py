"""Background runs on two Celery worker processes (threads pool), Redis as the broker.

Each worker is ``celery -A project worker --pool threads`` on the demo's
settings with ``DJANGO_TASKS=celery``; one test starts the run through the demo's
web server, started as documented (``manage.py runserver`` with the same
environment), so the app the web process sends with is the project's own. Like project/tests/test_rq.py (whose
helpers it uses), it needs PostgreSQL, skips on SQLite, and skips without Redis
locally but fails under ``CI=true``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import IO

import httpx
import pytest
import redis
from django.contrib.auth.models import User
from django.db import connection
from django.test import override_settings

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.models import Run, RunEvent, RunEventType
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.reaper import reap_runs
from llm_conversations.runs.service import execute_run
from project.tests.live_runs import signed_in
from project.tests.slow_provider import SlowProvider, assert_finished_without_charging_twice
from project.tests.test_background import free_port
from project.tests.test_rq import (
    CLAIMED,
    ROOT,
    assert_each_completed_once,
    database_url,
    redis_problem,
    runs_ended,
    stop,
    wait_for,
)
from tests.browser.chromium import running_under_ci

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]

RUNS = 10
REDIS_URL = os.environ.get("CELERY_TEST_REDIS_URL") or "redis://127.0.0.1:6379/5"
BACKEND = {"default": {"BACKEND": "llm_conversations.tasks.celery.CeleryBackend"}}


@contextmanager
def celery_broker() -> Iterator[None]:
    """Background runs sent to Celery on Redis for the block; skips (fails under CI)
    where the test cannot have both Redis and PostgreSQL."""
    if connection.vendor != "postgresql":
        pytest.skip("Celery workers are separate processes: run with DATABASE_URL=postgres://...")
    problem = redis_problem(REDIS_URL)
    if problem and running_under_ci(os.environ):
        pytest.fail(f"{problem}. CI=true: the Celery test may not be skipped.")
    if problem:
        pytest.skip(f"{problem} (skipped locally; under CI=true this fails)")
    # This process loaded its settings without DJANGO_TASKS=celery (the processes it
    # starts have it): its app is told the broker here.
    from project import celery_app as app

    app.conf.broker_url = REDIS_URL
    try:
        with override_settings(TASKS=BACKEND):
            yield
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge("default")
        # A killed worker's unacknowledged message too: the database it names is gone.
        redis.Redis.from_url(REDIS_URL).flushdb()


@pytest.fixture
def celery_settings() -> Iterator[None]:
    with celery_broker():
        yield


def start(command: list[str], log: IO[str], **extra: str) -> subprocess.Popen[str]:
    """``command`` in the checkout, on the demo's settings with ``DJANGO_TASKS=celery``."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DJANGO_TASKS": "celery",
        "REDIS_URL": REDIS_URL,
        "DATABASE_URL": database_url(),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def start_worker(name: str, log: IO[str], **extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "celery", "-A", "project", "worker", "--pool", "threads"]
    command += ["--concurrency", "8", "-Q", "default", "-n", f"{name}@%h", "-l", "INFO"]
    return start(command, log, **extra)


def test_a_run_started_through_the_web_server_is_executed_by_a_worker(
    celery_settings: None, tmp_path: Path
) -> None:
    """The web process loads the project's Celery app with Django, not by a test's
    import: its request threads send to the configured broker, not Celery's default."""
    user = User.objects.create_user("celery-web")
    conversation = create_conversation(owner=user, title="celery web")
    port = free_port()
    logs = [tmp_path / "worker.log", tmp_path / "web.log"]
    files = [log.open("w") for log in logs]
    processes: list[subprocess.Popen[str]] = []
    try:
        processes.append(start_worker(f"llmconv-web-{uuid.uuid4().hex[:8]}", files[0]))
        web = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
        processes.append(start(web, files[1]))

        def serving() -> bool:
            for process in processes:
                assert process.poll() is None, "a process exited"
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/tools/", timeout=2)
            except httpx.TransportError:
                return False
            return " ready." in logs[0].read_text()

        wait_for(serving, "the worker and the web server", logs)
        response = httpx.post(
            f"http://127.0.0.1:{port}/api/conversations/{conversation.pk}/runs/",
            json={"message": "hello", "background": True},
            headers=signed_in(user),  # the demo's API takes the session, as a browser sends it
            timeout=30,
        )
        assert response.status_code == 202, response.text
        run_id = uuid.UUID(response.json()["id"])
        wait_for(partial(runs_ended, [run_id]), "the run to end", logs)
    finally:
        stop(processes)
        for file in files:
            file.close()

    assert Run.objects.get(pk=run_id).status == "completed"
    assert [m.role for m in load_messages(conversation)] == ["user", "assistant"]


def test_two_celery_workers_complete_each_run_exactly_once(
    celery_settings: None, tmp_path: Path
) -> None:
    names = [f"llmconv-test-{uuid.uuid4().hex[:8]}-{n}" for n in (1, 2)]
    logs = [tmp_path / f"{name}.log" for name in names]
    files = [log.open("w") for log in logs]
    workers: list[subprocess.Popen[str]] = []
    try:
        workers = [start_worker(name, file) for name, file in zip(names, files, strict=True)]

        def both_ready() -> bool:
            for worker in workers:
                assert worker.poll() is None, "a worker exited"
            return all(" ready." in log.read_text() for log in logs)

        wait_for(both_ready, "both workers to be ready", logs)
        conversations = [create_conversation(title=f"celery {n}") for n in range(RUNS)]
        ids = [
            ToolLoopService().start(conversation, f"hello {n}", background=True).pk
            for n, conversation in enumerate(conversations)
        ]

        wait_for(partial(runs_ended, ids), f"{RUNS} runs to end", logs)
    finally:
        stop(workers)
        for file in files:
            file.close()

    assert_each_completed_once(ids, conversations)
    per_worker: Counter[int] = Counter()
    claimed: list[uuid.UUID] = []
    for worker, log in zip(workers, logs, strict=True):
        # Celery's log and the project's both print a claim: each line is read once.
        for run_id, _host, pid, attempt in set(CLAIMED.findall(log.read_text())):
            assert (int(pid), attempt) == (worker.pid, "1")
            claimed.append(uuid.UUID(run_id))
            per_worker[worker.pid] += 1
    assert sorted(claimed) == sorted(ids)
    assert set(per_worker) == {worker.pid for worker in workers}, per_worker


def test_a_redelivered_message_does_not_execute_a_run_twice(celery_settings: None) -> None:
    """``acks_late`` may deliver a run's message again: the run's claim refuses it."""
    from llm_conversations.tasks.celery import execute_task

    conversation = create_conversation(title="celery redelivery")
    # Queued on the broker with no worker listening; executed here twice instead.
    run = ToolLoopService().start(conversation, "hello", background=True)
    execute_task(execute_run.module_path, [str(run.pk)], {})
    execute_task(execute_run.module_path, [str(run.pk)], {})  # the same message again
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("completed", 1)
    assert RunEvent.objects.filter(run=run, type=RunEventType.RUN_RUNNING).count() == 1
    assert [m.role for m in load_messages(conversation)] == ["user", "assistant"]


def test_a_killed_workers_run_is_finished_by_another_without_repeating_a_tool(
    celery_settings: None, provider: SlowProvider, tmp_path: Path
) -> None:
    """SIGKILL mid-tool: the message stays unacknowledged on the broker until its
    visibility timeout, so the run's lease and the reaper finish it on another worker,
    and the ``repeatable=False`` call is answered, not run again."""
    provider.delay = 0.1
    charged = tmp_path / "charged.log"
    extra = {
        "DJANGO_SETTINGS_MODULE": "project.tests.worker_settings",
        "WORKER_PROVIDER_URL": provider.base_urls()["openai"],
        "WORKER_TOOL_LOG": str(charged),
    }
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    files = [log.open("w") for log in logs]
    workers: list[subprocess.Popen[str]] = []
    try:
        workers.append(start_worker(f"llmconv-kill-{uuid.uuid4().hex[:8]}-1", files[0], **extra))
        wait_for(lambda: " ready." in logs[0].read_text(), "the first worker", logs)
        run = ToolLoopService().start(
            create_conversation(title="celery kill"), "please pay", background=True
        )
        wait_for(charged.exists, "the tool to start", logs)
        os.killpg(workers[0].pid, signal.SIGKILL)  # mid-tool: the call may have had its effect
        workers[0].wait()
        wait_for(lambda: reap_runs().requeued == (run.pk,), "the lease to expire", logs)
        workers.append(start_worker(f"llmconv-kill-{uuid.uuid4().hex[:8]}-2", files[1], **extra))
        wait_for(partial(runs_ended, [run.pk]), "the run to end", logs)
    finally:
        stop(workers)
        for file in files:
            file.close()

    assert_finished_without_charging_twice(run, charged)
