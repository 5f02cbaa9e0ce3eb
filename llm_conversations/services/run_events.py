"""Reading a run's durable event log: pages of events after an id, and followers.

The log is written by :mod:`llm_conversations.services.run_log`, one run's
events committed in id order, so a reader that resumes after the last id it
saw misses nothing and repeats nothing.

A follower reads a page, hands it on, and waits for more: it polls every
``POLL_SECONDS`` on every database; on PostgreSQL (psycopg 3) it also
``LISTEN``\\s on the run's channel in a connection of its own and wakes as soon
as new events are committed (then it reads at least every
``LISTEN_POLL_SECONDS``, should a notification be lost with its connection).
:func:`follow` is the synchronous follower (a thread waits); :func:`afollow`
the asynchronous one (``asyncio`` waits; reads go through ``sync_to_async``).
Both stop after the event that ends a stream (``run.completed``,
``run.failed``, ``run.cancelled`` or ``run.requires_action``), or at once
when nothing is left to read of a run that no longer executes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection

from llm_conversations.models import Message, Run, RunEvent, RunEventType, RunStatus
from llm_conversations.services.run_log import channel

__all__ = [
    "LISTEN_POLL_SECONDS",
    "PAGE_SIZE",
    "POLL_SECONDS",
    "Page",
    "afollow",
    "events_after",
    "follow",
    "last_event_id",
    "messages_of",
    "read_page",
    "started_call_ids",
]

POLL_SECONDS = 0.2
LISTEN_POLL_SECONDS = 1.0
PAGE_SIZE = 100

# Statuses in which a run may still log events without anyone acting on it.
_EXECUTING = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})


@dataclass(frozen=True)
class Page:
    """Events of one run in id order, with what rendering them needs.

    ``run`` is read after the events, so it is at least as recent as the last
    of them; ``messages`` are the stored turns the events name, by id.
    ``ended``: the last event ends a stream. ``stopped``: the run no longer
    executes (or no longer exists) and nothing is left to read.
    """

    run: Run | None
    events: list[RunEvent]
    messages: dict[str, Message] = field(default_factory=dict)
    ended: bool = False
    stopped: bool = False
    full: bool = False

    @property
    def last_id(self) -> int | None:
        return self.events[-1].id if self.events else None


def events_after(run_id: uuid.UUID | str, after_id: int, limit: int = PAGE_SIZE) -> list[RunEvent]:
    """At most ``limit`` events of the run with an id above ``after_id``, in order."""
    return list(RunEvent.objects.filter(run_id=run_id, id__gt=after_id).order_by("id")[:limit])


def last_event_id(run_id: uuid.UUID | str) -> int:
    """The id of the run's last event so far (0 when it has none)."""
    last = RunEvent.objects.filter(run_id=run_id).order_by("-id").values_list("id", flat=True)
    return last.first() or 0


def messages_of(events: Iterable[RunEvent]) -> dict[str, Message]:
    """The messages the events name, by id, in one query (none if they name none)."""
    ids = {
        str(e.data["message"]) for e in events if isinstance(e.data, dict) and e.data.get("message")
    }
    if not ids:
        return {}
    return {str(m.pk): m for m in Message.objects.filter(pk__in=ids)}


def read_page(run_id: uuid.UUID | str, after_id: int, limit: int = PAGE_SIZE) -> Page:
    """The next events after ``after_id``, cut after the first one that ends a stream.

    Two queries (events, run), three when the events name messages. When
    nothing was found and the run no longer executes, the events are read once
    more: the run's status is then older than that read, so an empty answer
    means nothing more will be logged without someone acting on the run.
    """
    events = events_after(run_id, after_id, limit)
    run = Run.objects.filter(pk=run_id).first()
    stopped = run is None or run.status not in _EXECUTING
    if not events and run is not None and stopped:
        events = events_after(run_id, after_id, limit)
    full = len(events) == limit
    ended = False
    for index, event in enumerate(events):
        if RunEventType(event.type).ends_stream:
            events, ended, full = events[: index + 1], True, False
            break
    return Page(
        run=run,
        events=events,
        messages=messages_of(events),
        ended=ended,
        stopped=stopped and not events,
        full=full,
    )


def _listens() -> bool:
    if connection.vendor != "postgresql":
        return False
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return bool(is_psycopg3)


def _listen_sql(run_id: uuid.UUID | str) -> Any:
    from psycopg import sql

    return sql.SQL("LISTEN {}").format(sql.Identifier(channel(run_id)))


class _Listener:
    """A connection of its own ``LISTEN``-ing on the run's channel (PostgreSQL)."""

    def __init__(self, run_id: uuid.UUID | str) -> None:
        import psycopg

        self._connection = psycopg.connect(**connection.get_connection_params(), autocommit=True)
        try:
            self._connection.execute(_listen_sql(run_id))
        except BaseException:
            self._connection.close()
            raise

    def wait(self, timeout: float) -> None:
        for _ in self._connection.notifies(timeout=timeout, stop_after=1):
            pass

    def close(self) -> None:
        self._connection.close()


class _AsyncListener:
    """:class:`_Listener` on an asynchronous connection."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    @classmethod
    async def open(cls, run_id: uuid.UUID | str) -> _AsyncListener:
        import psycopg

        params = await sync_to_async(connection.get_connection_params)()
        params.pop("cursor_factory", None)  # Django's cursors are synchronous
        opened = await psycopg.AsyncConnection.connect(**params, autocommit=True)
        try:
            await opened.execute(_listen_sql(run_id))
        except BaseException:
            await opened.close()
            raise
        return cls(opened)

    async def wait(self, timeout: float) -> None:
        async for _ in self._connection.notifies(timeout=timeout, stop_after=1):
            pass

    async def close(self) -> None:
        await self._connection.close()


class _Clock:
    """When the next heartbeat is due, and how long to wait until the next read."""

    def __init__(self, heartbeat: float | None, listening: bool) -> None:
        self._heartbeat = heartbeat
        self._poll = LISTEN_POLL_SECONDS if listening else POLL_SECONDS
        self._last = time.monotonic()

    def sent(self) -> None:
        self._last = time.monotonic()

    def wait_for(self) -> float:
        if self._heartbeat is None:
            return self._poll
        due = self._last + self._heartbeat - time.monotonic()
        return max(0.0, min(self._poll, due))

    def heartbeat_due(self) -> bool:
        return self._heartbeat is not None and time.monotonic() - self._last >= self._heartbeat


def follow(
    run_id: uuid.UUID | str,
    after_id: int = 0,
    *,
    heartbeat: float | None = None,
    limit: int = PAGE_SIZE,
) -> Iterator[Page | None]:
    """Pages of the run's events after ``after_id`` as they are logged, waiting between them.

    Yields ``None`` when ``heartbeat`` seconds passed without a page. Ends
    after the page that ends a stream, or when the run no longer executes and
    nothing is left to read.
    """
    listener: _Listener | None = None
    clock = _Clock(heartbeat, _listens())
    try:
        while True:
            page = read_page(run_id, after_id, limit)
            if page.events:
                yield page
                clock.sent()
                after_id = page.events[-1].id
                if page.ended:
                    return
                if page.full:
                    continue
            elif page.stopped:
                return
            if listener is None and _listens():
                # Listen first, then read again: nothing committed in between is missed.
                listener = _Listener(run_id)
                continue
            if listener is not None:
                listener.wait(clock.wait_for())
            else:
                time.sleep(clock.wait_for())
            if clock.heartbeat_due():
                yield None
                clock.sent()
    finally:
        if listener is not None:
            listener.close()


async def afollow(
    run_id: uuid.UUID | str,
    after_id: int = 0,
    *,
    heartbeat: float | None = None,
    limit: int = PAGE_SIZE,
) -> AsyncIterator[Page | None]:
    """:func:`follow` for an event loop: no thread is held while it waits."""
    read = sync_to_async(read_page, thread_sensitive=True)
    listens = await sync_to_async(_listens, thread_sensitive=True)()
    listener: _AsyncListener | None = None
    clock = _Clock(heartbeat, listens)
    try:
        while True:
            page = await read(run_id, after_id, limit)
            if page.events:
                yield page
                clock.sent()
                after_id = page.events[-1].id
                if page.ended:
                    return
                if page.full:
                    continue
            elif page.stopped:
                return
            if listener is None and listens:
                listener = await _AsyncListener.open(run_id)
                continue
            if listener is not None:
                await listener.wait(clock.wait_for())
            else:
                await asyncio.sleep(clock.wait_for())
            if clock.heartbeat_due():
                yield None
                clock.sent()
    finally:
        if listener is not None:
            await listener.close()


def started_call_ids(run_id: uuid.UUID | str) -> set[str]:
    """Ids of the calls whose tool may have started in an earlier attempt of the run."""
    return {
        str(data["tool_call"]["id"])
        for data in RunEvent.objects.filter(
            run_id=run_id, type=RunEventType.TOOL_CALL_STARTED
        ).values_list("data", flat=True)
    }
