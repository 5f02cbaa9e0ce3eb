"""Executing tasks queued in the database many at a time, picked up as they are committed.

django-tasks-db's ``db_worker`` executes one task at a time, and a run is one
task that waits on providers and tools for most of its length: a process per
run in flight. :class:`ConcurrentWorker` is that worker with threads: it
claims ready task rows the way ``db_worker`` does (``SELECT ... FOR UPDATE
SKIP LOCKED``, ``claim()``), up to ``concurrency`` in flight, and executes
each with ``db_worker``'s own ``run_task()`` (result and signals recorded as
there) on a bounded thread pool. A run's loop gives its connection back to the
pool before each provider or tool wait (``runs.live_connections``), so the
connections a worker holds are bounded by the pool, not by runs in flight.

On PostgreSQL it ``LISTEN``\\s for the ``NOTIFY`` that ``enqueue.enqueue``
sends with each task, so a queued run is claimed as soon as it is committed;
polling every ``interval`` seconds remains for deferred tasks and for the
time a dropped listening connection takes to come back.

Leases, heartbeats, cancels and the reaper work per run as under any worker:
a worker that dies leaves its runs' leases to expire, and the reaper requeues
them for another.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Any

from django.db import (
    DatabaseError,
    OperationalError,
    close_old_connections,
    connections,
    router,
)
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult
from django_tasks_db.utils import exclusive_transaction, is_locked_database_exception

from llm_conversations.runs.live_connections import return_connection
from llm_conversations.runs.log.listener import listen, notifies
from llm_conversations.tasks.enqueue import TASK_CHANNEL

__all__ = ["ConcurrentWorker"]

logger = logging.getLogger("django_tasks_db")


class ConcurrentWorker(Worker):
    """``db_worker``'s worker, executing up to ``concurrency`` tasks at once.

    The first SIGINT or SIGTERM stops claiming and waits up to ``grace``
    seconds for the tasks in flight; a second one, or the end of the grace,
    exits at once, leaving the runs' leases to expire.
    """

    def __init__(self, *, concurrency: int, grace: float, **options: Any) -> None:
        super().__init__(**options)
        self.concurrency = concurrency
        self.grace = grace
        self.listening = threading.Event()
        self._wakeup = threading.Event()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._claimed = 0

    @property
    def in_flight(self) -> int:
        """Tasks executing now."""
        with self._lock:
            return self._in_flight

    def shutdown(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: stop claiming; the second signal exits at once."""
        name = signal.strsignal(signum)
        if not self.running:
            logger.warning("Received %s again: exiting; the reaper requeues the runs", name)
            os._exit(1)
        logger.warning(
            "Received %s: finishing %d task(s) in flight (up to %g s; again to exit now)",
            name,
            self.in_flight,
            self.grace,
        )
        self.running = False
        self._wakeup.set()

    def run(self) -> None:
        """Claim and execute tasks until stopped (or, with ``batch``, the queue is empty)."""
        alias = router.db_for_write(DBTaskResult)
        logger.info(
            "Starting worker worker_id=%s queues=%s concurrency=%d",
            self.worker_id,
            ",".join(self.queue_names),
            self.concurrency,
        )
        if self.startup_delay and self.interval:
            time.sleep(random.random())  # spreads workers started together
        stop = threading.Event()
        wakeup = self._listen(alias, stop)
        executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="llm-worker")
        try:
            while self.running:
                self._wakeup.clear()  # before the claim: a later push wakes the wait below
                free = self.concurrency - self.in_flight
                if self.max_tasks is not None:
                    free = min(free, self.max_tasks - self._claimed)
                claimed = self._claim(free)
                for row in claimed:
                    with self._lock:
                        self._in_flight += 1
                    executor.submit(self._execute, row)
                self._claimed += len(claimed)
                if self.batch and not claimed and not self.in_flight:
                    logger.info("No more tasks to run for worker_id=%s", self.worker_id)
                    break
                if self.max_tasks is not None and self._claimed >= self.max_tasks:
                    logger.info("Claimed %d tasks on worker_id=%s", self._claimed, self.worker_id)
                    break
                self._wakeup.wait(self.interval)
        finally:
            stop.set()
            if wakeup is not None:
                wakeup.send(b"\0")
                wakeup.close()
            self._drain(executor)

    def _listen(self, alias: str, stop: threading.Event) -> socket.socket | None:
        """Start the thread that ``LISTEN``\\s for queued tasks; its wake-up socket."""
        if not notifies(alias):
            return None
        inner, outer = socket.socketpair()
        threading.Thread(
            target=listen,
            args=(TASK_CHANNEL, alias, stop, inner, self.listening, self._notified),
            name="llm-worker-listener",
            daemon=True,
        ).start()
        return outer

    def _notified(self, queue_name: str | None) -> None:
        if queue_name is None or self.process_all_queues or queue_name in self.queue_names:
            self._wakeup.set()

    def _claim(self, count: int) -> list[DBTaskResult[Any, Any]]:
        """Up to ``count`` ready tasks, claimed for this worker in one transaction."""
        if count <= 0:
            return []
        close_old_connections()
        tasks = DBTaskResult.objects.ready().filter(backend_name=self.backend_name)
        if not self.process_all_queues:
            tasks = tasks.filter(queue_name__in=self.queue_names)
        if self.excluded_queue_names:
            tasks = tasks.exclude(queue_name__in=self.excluded_queue_names)
        try:
            with exclusive_transaction(tasks.db):
                rows = list(tasks.select_for_update(skip_locked=True)[:count])
                for row in rows:
                    row.claim(self.worker_id)
        except OperationalError as exc:
            if not is_locked_database_exception(exc):
                return self._claim_failed(exc)
            rows = []  # SQLite's writer lock is taken: try again at the next pass
        except DatabaseError as exc:
            return self._claim_failed(exc)
        return_connection()
        return rows

    def _claim_failed(self, exc: DatabaseError) -> list[DBTaskResult[Any, Any]]:
        # The database went away, or the pool had no connection in time: the runs
        # in flight go on, and the next pass claims again on a new connection.
        logger.warning("Claiming tasks failed (%s); retrying", exc)
        connections[router.db_for_write(DBTaskResult)].close()
        return []

    def _execute(self, row: DBTaskResult[Any, Any]) -> None:
        try:
            self.run_task(row)
        finally:
            # This thread's connection: back to the pool, or closed.
            connections.close_all()
            with self._lock:
                self._in_flight -= 1
            self._wakeup.set()

    def _drain(self, executor: ThreadPoolExecutor) -> None:
        """Wait for the tasks in flight, up to ``grace`` seconds once stopping."""
        executor.shutdown(wait=False)
        deadline: float | None = None
        while self.in_flight:
            if deadline is None and not self.running:  # a signal: no longer than the grace
                deadline = time.monotonic() + self.grace
            if deadline is not None and time.monotonic() >= deadline:
                logger.warning(
                    "%d task(s) still in flight after %g s: exiting; the reaper requeues "
                    "their runs once their leases expire",
                    self.in_flight,
                    self.grace,
                )
                logging.shutdown()
                os._exit(1)
            self._wakeup.wait(0.1)
            self._wakeup.clear()
        connections.close_all()
