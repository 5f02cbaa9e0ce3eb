"""Many background runs in flight in one ``manage.py llm_worker`` process, on PostgreSQL.

Starts, as subprocesses on 127.0.0.1: the fake OpenAI-compatible provider of
``bench/load_runs.py`` (each call answered after ``--latency`` seconds: one
``get_time`` call, then text, so a run is two model rounds and one tool) and
one worker (``llm_worker --concurrency``, a pool of ``--pool`` connections),
on the settings of ``bench/settings/load_runs.py``.

Then two phases:

- pick-up: ``--trickle`` runs started one at a time, 0.1 s apart, on an idle
  worker; each run's delay from its task's enqueue to its claim;
- burst: ``--runs`` runs started at once (from 8 threads). Printed: wall time
  against the ideal for unlimited concurrency (the time the starts took, then
  two model calls: ``2 x latency``), the peak of runs in flight, the worker's
  resident memory idle and at its peak and the growth per run in flight, the
  peak of the worker's database connections (``pg_stat_activity``), every run
  completed with a valid conversation, and the pick-up delay under the burst.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench \\
        python bench/concurrent_runs.py [--runs 200] [--latency 2.0] [--concurrency RUNS] \\
            [--pool 20] [--trickle 50]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load_runs import SETTINGS, free_port, ms, percentile, pickups, rss_kib

APPLICATION = "bench-llm-worker"  # the worker's connections, as pg_stat_activity names them
ENDED = ("completed", "failed", "cancelled", "requires_action")


@dataclass
class Peaks:
    """What the sampler saw during the burst."""

    in_flight: int = 0
    connections: int = 0
    rss_kib: int = 0


def worker_connections() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            [APPLICATION],
        )
        return int(cursor.fetchone()[0])


def listening() -> bool:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = %s AND query LIKE 'LISTEN %%'",
            [APPLICATION],
        )
        return cursor.fetchone() is not None


def create_conversations(count: int) -> list[Any]:
    from llm_conversations.conversations import create_conversation

    return [create_conversation(title=f"concurrent {i}") for i in range(count)]


def start_runs(conversations: list[Any], *, spacing: float = 0.0, threads: int = 1) -> list[str]:
    """Start a background run in each conversation, ``spacing`` seconds apart or at once
    (from ``threads`` threads)."""
    from django.db import connections

    from llm_conversations.runs import ToolLoopService

    service = ToolLoopService()

    def start(conversation: Any) -> str:
        try:
            run = service.start(conversation, "What time is it?", background=True)
        finally:
            if threads > 1:
                connections.close_all()  # this thread's, back to the pool
        if spacing:
            time.sleep(spacing)
        return str(run.pk)

    if threads == 1:
        return [start(conversation) for conversation in conversations]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(start, conversations))


def wait_ended(ids: list[str], worker: subprocess.Popen[bytes], limit: float) -> None:
    from llm_conversations.models import Run

    deadline = time.monotonic() + limit
    while Run.objects.filter(pk__in=ids).exclude(status__in=ENDED).exists():
        if worker.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the worker stopped or the runs did not end within {limit:g} s")
        time.sleep(0.05)


def sample(pid: int, peaks: Peaks, stop: threading.Event) -> None:
    from django.db import connection

    from llm_conversations.models import Run

    try:
        while not stop.wait(0.05):
            peaks.in_flight = max(peaks.in_flight, Run.objects.filter(status="running").count())
            peaks.connections = max(peaks.connections, worker_connections())
            peaks.rss_kib = max(peaks.rss_kib, rss_kib(pid))
    finally:
        connection.close()


def valid_conversations(ids: list[str]) -> int:
    from llm_conversations.conversations import load_messages
    from llm_conversations.core.sequence import check_sequence
    from llm_conversations.models import Run

    valid = 0
    for conversation_id in Run.objects.filter(pk__in=ids, status="completed").values_list(
        "conversation_id", flat=True
    ):
        messages = load_messages(conversation_id)
        check_sequence(messages)
        valid += [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    return valid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=200, help="runs of the burst (200)")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per model call (2)")
    parser.add_argument("--concurrency", type=int, help="llm_worker --concurrency (--runs)")
    parser.add_argument("--pool", type=int, default=20, help="the worker's connection pool (20)")
    parser.add_argument("--trickle", type=int, default=50, help="runs of the pick-up phase (50)")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        print(
            "skipped: needs PostgreSQL, e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench"
        )
        return
    concurrency = args.concurrency or args.runs
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()
    from django.core.management import call_command
    from django_tasks_db.models import DBTaskResult

    from llm_conversations.models import Conversation

    call_command("migrate", verbosity=0)
    Conversation.objects.filter(title__startswith="concurrent ").delete()
    DBTaskResult.objects.all().delete()

    logs = Path(tempfile.mkdtemp(prefix="concurrent_runs-"))
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "BENCH_PROVIDER_URL": f"http://127.0.0.1:{port}/v1",
        "BENCH_POOL_SIZE": str(args.pool),
        # A thread waiting for a connection is the database setting the pace;
        # it should wait, not fail its run (docs/deployment.md).
        "BENCH_POOL_TIMEOUT": "120",
        "PGAPPNAME": APPLICATION,  # libpq's default application_name, for pg_stat_activity
        "PYTHONUNBUFFERED": "1",
    }
    python = sys.executable
    children: list[subprocess.Popen[bytes]] = []
    try:
        with (logs / "provider.log").open("wb") as log:
            children.append(
                subprocess.Popen(
                    [
                        python,
                        "bench/load_runs.py",
                        "--serve-provider",
                        str(port),
                        str(args.latency),
                    ],
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        with (logs / "worker.log").open("wb") as log:
            worker = subprocess.Popen(
                [
                    python,
                    "manage.py",
                    "llm_worker",
                    "--no-reload",
                    "--no-startup-delay",
                    "--concurrency",
                    str(concurrency),
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            children.append(worker)
        deadline = time.monotonic() + 30
        while not listening():
            if time.monotonic() > deadline or worker.poll() is not None:
                raise SystemExit(f"the worker did not start listening; see {logs}")
            time.sleep(0.1)
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/calls", timeout=5).close()
        print(
            f"llm_worker --concurrency {concurrency}, pool {args.pool}, provider latency "
            f"{args.latency:g} s (2 model rounds + 1 tool per run), PostgreSQL; logs in {logs}"
        )

        # Pick-up: one run at a time on an idle worker.
        trickle = start_runs(create_conversations(args.trickle), spacing=0.1)
        wait_ended(trickle, worker, 60 + args.trickle * 4 * args.latency)
        alone = pickups(trickle)
        print(
            f"pick-up, one run at a time ({len(alone)} runs): "
            f"p50 {ms(percentile(alone, 0.5))}, p95 {ms(percentile(alone, 0.95))}"
        )

        # The burst.
        time.sleep(1)
        idle_kib = rss_kib(worker.pid)
        peaks = Peaks()
        stop = threading.Event()
        sampler = threading.Thread(target=sample, args=(worker.pid, peaks, stop), daemon=True)
        conversations = create_conversations(args.runs)
        sampler.start()
        began = time.monotonic()
        burst = start_runs(conversations, threads=8)
        started = time.monotonic() - began
        wait_ended(burst, worker, 120 + args.runs * 2 * args.latency)
        wall = time.monotonic() - began
        stop.set()
        sampler.join()
        # Unlimited concurrency: each run ends two model calls after it started.
        ideal = started + 2 * args.latency
        from llm_conversations.models import Run

        completed = Run.objects.filter(pk__in=burst, status="completed").count()
        valid = valid_conversations(burst)
        under_load = pickups(burst)
        growth = max(0, peaks.rss_kib - idle_kib)
        per_run = growth / peaks.in_flight if peaks.in_flight else float("nan")
        print(f"burst: {args.runs} runs started in {started:.1f} s, all ended in {wall:.1f} s")
        print(
            f"  throughput {args.runs / wall:.1f} runs/s; ideal (unlimited concurrency: the "
            f"starts, then 2 x latency) {ideal:.1f} s -> {100 * ideal / wall:.0f}% of ideal"
        )
        print(f"  runs in flight at peak {peaks.in_flight}; completed {completed}/{args.runs}")
        print(f"  conversations valid (user, call, result, answer): {valid}/{args.runs}")
        print(
            f"  worker RSS idle {idle_kib / 1024:.0f} MB, peak {peaks.rss_kib / 1024:.0f} MB: "
            f"{per_run:.0f} KiB per run in flight"
        )
        print(f"  peak database connections of the worker {peaks.connections} (pool {args.pool})")
        print(
            f"  pick-up under the burst: p50 {ms(percentile(under_load, 0.5))}, "
            f"p95 {ms(percentile(under_load, 0.95))}"
        )
    finally:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
        for child in children:
            try:
                child.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()


if __name__ == "__main__":
    main()
