"""Following a run's durable event log: pages as they are logged, waiting between them.

A follower reads a page (:mod:`llm_conversations.runs.log.reader`), hands it
on, and waits for more. It is woken by
:mod:`llm_conversations.runs.log.listener` (on PostgreSQL, the process's one
``LISTEN``; on every database, events this process commits) and polls as
well: every ``POLL_SECONDS``, or every ``LISTEN_POLL_SECONDS`` while
notifications arrive, should one be lost with its connection.
:func:`follow` is the synchronous follower (a thread waits); :func:`afollow`
the asynchronous one (``asyncio`` waits; reads run on the loop's thread pool).
Both stop after the event that ends a stream (``run.completed``,
``run.failed``, ``run.cancelled`` or ``run.requires_action``), or at once
when nothing is left to read of a run that no longer executes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from enum import Enum
from functools import partial
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from llm_conversations.runs.log.listener import listener
from llm_conversations.runs.log.pushes import Pushed, Waiter
from llm_conversations.runs.log.reader import (
    PAGE_SIZE,
    Page,
    batch_page,
    lacks,
    pushed_page,
    read_page,
)

__all__ = ["LISTEN_POLL_SECONDS", "POLL_SECONDS", "afollow", "follow"]

_T = TypeVar("_T")

POLL_SECONDS = 0.2
# How long a follower reads again while the database is unreachable.
RECONNECT_SECONDS = 30.0
# While the process listens, PostgreSQL delivers every committed NOTIFY, and a
# dropped listening connection wakes every reader: the poll only guards against
# the unforeseen. Each waiting stream reads once per poll, so 1,000 idle streams
# read 33 times a second (bench/idle_streams.py: 10 % of a core, 32 % at 10 s).
LISTEN_POLL_SECONDS = 30.0


def _outliving_restarts(read: Callable[[], _T]) -> _T:
    """``read()``, made again on a new connection while the database is unreachable
    (a restart, a terminated session), for up to ``RECONNECT_SECONDS``: a follower
    outlives it and ends with the run's end event. Inside an outer transaction (a
    test's) nothing can be done again."""
    give_up = time.monotonic() + RECONNECT_SECONDS
    while True:
        try:
            return read()
        except (OperationalError, InterfaceError):
            if connection.in_atomic_block or time.monotonic() > give_up:
                raise
            connection.close()
            time.sleep(0.5)


def _pushed_page_in_pool(batch: Pushed) -> Page:
    try:
        return _outliving_restarts(partial(pushed_page, batch))
    finally:
        close_old_connections()


class _Next(Enum):
    READ = "read"
    WAIT = "wait"
    END = "end"


class _Cursor:
    """Where a reader stands in a run's log, when its next heartbeat is due, and
    what each page it read means: what :func:`follow` and :func:`afollow` share."""

    def __init__(self, after_id: int, heartbeat: float | None) -> None:
        self.after_id = after_id
        self._heartbeat = heartbeat
        self._last = time.monotonic()  # the last event or heartbeat sent
        self._read_at = self._last

    def advance(self, page: Page) -> _Next:
        """Past ``page`` (yielded first when it has events): read again, wait, or end."""
        self._read_at = time.monotonic()
        if not page.events:
            return _Next.END if page.stopped else _Next.WAIT
        self._last = time.monotonic()
        self.after_id = page.events[-1].id
        if page.ended:
            return _Next.END
        return _Next.READ if page.full else _Next.WAIT

    def take(self, waiter: Waiter) -> tuple[list[Pushed], bool]:
        """The pushed batches that continue the log from here, in order, and whether
        the log must be read: the waiter was woken to, or a batch does not continue
        from where the last one ends (its writer did not know, or it overtook one)."""
        batches, read = waiter.take()
        taken: list[Pushed] = []
        expected = self.after_id
        for batch in batches:
            if batch.last_id <= expected:
                continue  # read already
            if batch.after != expected:
                return taken, True
            taken.append(batch)
            expected = batch.last_id
        return taken, read

    @staticmethod
    def _poll() -> float:
        return LISTEN_POLL_SECONDS if listener.listening else POLL_SECONDS

    def wait_for(self) -> float:
        """Seconds to wait for a wake-up: until the next poll or heartbeat is due."""
        wait = self._read_at + self._poll() - time.monotonic()
        if self._heartbeat is not None:
            wait = min(wait, self._last + self._heartbeat - time.monotonic())
        return max(0.0, wait)

    def poll_due(self) -> bool:
        """Whether the poll is due. A wait that ended for a heartbeat reads nothing:
        an idle stream costs no query for it."""
        return time.monotonic() - self._read_at >= self._poll()

    def beat(self) -> bool:
        """Whether a heartbeat is due now (it counts as sent)."""
        now = time.monotonic()
        if self._heartbeat is None or now - self._last < self._heartbeat:
            return False
        self._last = now
        return True


def follow(
    run_id: uuid.UUID | str,
    after_id: int = 0,
    *,
    heartbeat: float | None = None,
    limit: int = PAGE_SIZE,
) -> Iterator[Page | None]:
    """Pages of the run's events after ``after_id`` as they are logged, waiting between them.

    What is pushed (:mod:`~llm_conversations.runs.log.listener`) is taken
    as it comes, without reading the log; the log is read at the start, when a
    push does not continue where the reader stands, and at each poll. Yields
    ``None`` when ``heartbeat`` seconds passed without a page. Ends after the
    page that ends a stream, or when the run no longer executes and nothing is
    left to read.
    """
    cursor = _Cursor(after_id, heartbeat)
    with listener.subscribe(run_id) as waiter:
        while True:
            waiter.clear()  # before reading: a commit after the read wakes the wait
            page = _outliving_restarts(partial(read_page, run_id, cursor.after_id, limit))
            if page.events:
                yield page
            following = cursor.advance(page)
            while following is _Next.WAIT:
                waiter.wait(cursor.wait_for())
                batches, read = cursor.take(waiter)
                for batch in batches:
                    page = _outliving_restarts(partial(pushed_page, batch))
                    yield page
                    if cursor.advance(page) is _Next.END:
                        return
                if cursor.beat():
                    yield None
                if read or cursor.poll_due():
                    following = _Next.READ
            if following is _Next.END:
                return


def _read_page_in_pool(run_id: uuid.UUID | str, after_id: int, limit: int) -> Page:
    # A pool thread serves many streams: its connection follows CONN_MAX_AGE
    # as a request's would, closed or kept after each read.
    try:
        return _outliving_restarts(partial(read_page, run_id, after_id, limit))
    finally:
        close_old_connections()


async def afollow(
    run_id: uuid.UUID | str,
    after_id: int = 0,
    *,
    heartbeat: float | None = None,
    limit: int = PAGE_SIZE,
) -> AsyncIterator[Page | None]:
    """:func:`follow` for an event loop: no thread is held while it waits.

    Reads run on the event loop's shared thread pool rather than a thread of
    the request's own, so many open streams share a few connections; a pushed
    batch that has what rendering needs is taken on the loop itself.
    """
    read = sync_to_async(_read_page_in_pool, thread_sensitive=False)
    complete = sync_to_async(_pushed_page_in_pool, thread_sensitive=False)
    cursor = _Cursor(after_id, heartbeat)
    with listener.subscribe(run_id) as waiter:
        waiter.bind()
        while True:
            waiter.clear()
            page = await read(run_id, cursor.after_id, limit)
            if page.events:
                yield page
            following = cursor.advance(page)
            while following is _Next.WAIT:
                await waiter.await_(cursor.wait_for())
                batches, must_read = cursor.take(waiter)
                for batch in batches:
                    lacking = any(lacks(batch))
                    if lacking:
                        page = await complete(batch)
                    else:
                        page = batch_page(batch, batch.run, dict(batch.messages))
                    yield page
                    if cursor.advance(page) is _Next.END:
                        return
                if cursor.beat():
                    yield None
                if must_read or cursor.poll_due():
                    following = _Next.READ
            if following is _Next.END:
                return
