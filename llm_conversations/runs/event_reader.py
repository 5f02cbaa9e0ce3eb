"""Reading a run's durable event log: pages of events after an id, and followers.

The log is written by :mod:`llm_conversations.runs.event_log`, one run's
events committed in id order, so a reader that resumes after the last id it
saw misses nothing and repeats nothing.

A follower reads a page, hands it on, and waits for more. It is woken by
:mod:`llm_conversations.runs.event_listener` (on PostgreSQL, the process's
one ``LISTEN``; on every database, events this process commits) and polls as
well: every ``POLL_SECONDS``, or every ``LISTEN_POLL_SECONDS`` while
notifications arrive, should one be lost with its connection.
:func:`follow` is the synchronous follower (a thread waits); :func:`afollow`
the asynchronous one (``asyncio`` waits; reads run on the loop's thread pool).
Both stop after the event that ends a stream (``run.completed``,
``run.failed``, ``run.cancelled`` or ``run.requires_action``), or at once
when nothing is left to read of a run that no longer executes.

Text of a lost attempt: when a worker dies while a reply streams, the deltas
it logged belong to no stored turn, and the next attempt answers again from
the start. Its ``run.running`` says so with ``superseded_after`` (the id of
the last event before those deltas, :func:`unstored_text_after`); so does the
``run.fallback`` of a call that moved to a fallback entry after its stream
broke. A page names the deltas already known to be superseded, which readers
leave out.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from llm_conversations.models import DELTAS, Message, Run, RunEvent, RunEventType, RunStatus
from llm_conversations.runs.event_listener import Pushed, Waiter, listener

__all__ = [
    "LISTEN_POLL_SECONDS",
    "PAGE_SIZE",
    "POLL_SECONDS",
    "SUPERSEDING",
    "Page",
    "afollow",
    "events_after",
    "follow",
    "last_event_id",
    "messages_of",
    "pushed_page",
    "read_page",
    "started_call_ids",
    "unstored_text",
    "unstored_text_after",
]

_T = TypeVar("_T")

POLL_SECONDS = 0.2
# How long a follower reads again while the database is unreachable.
RECONNECT_SECONDS = 30.0
# While the process listens, PostgreSQL delivers every committed NOTIFY, and a
# dropped listening connection wakes every reader: the poll only guards against
# the unforeseen. Each waiting stream reads once per poll, so 1,000 idle streams
# read 33 times a second (bench/idle_streams.py: 10 % of a core, 32 % at 10 s).
LISTEN_POLL_SECONDS = 30.0
PAGE_SIZE = 100

# Events whose superseded_after marks the text deltas before them as answered again.
SUPERSEDING = (RunEventType.RUN_RUNNING, RunEventType.RUN_FALLBACK)


@dataclass(frozen=True)
class Page:
    """Events of one run in id order, with what rendering them needs.

    ``run`` is read after the events, so it is at least as recent as the last
    of them; ``messages`` are the stored turns the events name, by id.
    ``ended``: the last event ends a stream. ``stopped``: the run no longer
    executes (or no longer exists) and nothing is left to read.
    ``superseded``: ids of the page's text deltas that a later attempt
    answered again (a lost attempt's text), which readers do not show.
    """

    run: Run | None
    events: list[RunEvent]
    messages: dict[str, Message] = field(default_factory=dict)
    ended: bool = False
    stopped: bool = False
    full: bool = False
    superseded: frozenset[int] = frozenset()

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


def unstored_text_after(run_id: uuid.UUID | str) -> int | None:
    """When the log ends in deltas (text or reasoning) no stored turn followed: the id
    before them.

    ``None`` when the log does not end in deltas. Read by the claim of a new
    attempt (rare: only after a lost one), so two small queries are enough.
    """
    log = RunEvent.objects.filter(run_id=run_id).order_by("-id")
    if log.values_list("type", flat=True).first() not in DELTAS:
        return None
    before = log.exclude(type__in=DELTAS).values_list("id", flat=True).first()
    return before or 0


def unstored_text(run_id: uuid.UUID | str) -> str:
    """The text the log ends in that no stored turn holds ("" when it ends otherwise);
    reasoning text is not part of it."""
    after = unstored_text_after(run_id)
    if after is None:
        return ""
    deltas = RunEvent.objects.filter(
        run_id=run_id, id__gt=after, type=RunEventType.TEXT_DELTA
    ).order_by("id")
    return "".join(
        str(data.get("delta", ""))
        for data in deltas.values_list("data", flat=True)
        if isinstance(data, dict)
    )


def superseded_deltas(run: Run | None, events: list[RunEvent]) -> frozenset[int]:
    """Ids of the deltas (text and reasoning) among ``events`` that a later attempt's
    ``run.running`` or a ``run.fallback`` superseded.

    One query when the events hold text and the run's log holds superseded
    text (``Run.superseded_text``: it lost an attempt, or fell back after a
    stream broke); none for every other run.
    """
    deltas = [e.id for e in events if e.type in DELTAS]
    if run is None or not deltas or not run.superseded_text:
        return frozenset()
    restarts = RunEvent.objects.filter(
        run_id=run.pk, type__in=SUPERSEDING, id__gt=deltas[0]
    ).values_list("id", "data")
    spans = [
        (data["superseded_after"], restart_id)
        for restart_id, data in restarts
        if isinstance(data, dict) and isinstance(data.get("superseded_after"), int)
    ]
    return frozenset(d for d in deltas if any(after < d < until for after, until in spans))


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


def read_page(run_id: uuid.UUID | str, after_id: int, limit: int = PAGE_SIZE) -> Page:
    """The next events after ``after_id``, cut after the first one that ends a stream.

    Two queries (events, run), three when the events name messages. When
    nothing was found and the run no longer executes, the events are read once
    more: the run's status is then older than that read, so an empty answer
    means nothing more will be logged without someone acting on the run.
    """
    events = events_after(run_id, after_id, limit)
    run = Run.objects.filter(pk=run_id).first()
    stopped = run is None or not RunStatus(run.status).executing
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
        superseded=superseded_deltas(run, events),
    )


# Events a renderer draws from their own data and the turns they name; the
# others (run.*) show the run as it stands.
_SELF_CONTAINED = frozenset(
    {
        *DELTAS,
        RunEventType.TOOL_CALL_STARTED,
        RunEventType.TOOL_CALL_PROGRESS,
        RunEventType.MESSAGE_STORED,
        RunEventType.TOOL_RESULT_STORED,
    }
)


def _page_of(batch: Pushed, run: Run | None, messages: dict[str, Message]) -> Page:
    events = list(batch.events)
    ended = False
    for index, event in enumerate(events):
        if RunEventType(event.type).ends_stream:
            events, ended = events[: index + 1], True
            break
    return Page(run=run, events=events, messages=messages, ended=ended)


def _lacks(batch: Pushed) -> tuple[bool, bool]:
    """Whether rendering a batch needs the run, and stored turns, that it lacks."""
    needs_run = batch.run is None and any(
        RunEventType(e.type) not in _SELF_CONTAINED for e in batch.events
    )
    named = {str(e.data.get("message")) for e in batch.events if isinstance(e.data, dict)}
    named.discard("None")
    return needs_run, not named <= set(batch.messages)


def pushed_page(batch: Pushed) -> Page:
    """The page of a pushed batch, with what rendering needs and the batch lacks read:
    the run for ``run.*`` events (one query), the turns the events name (one query;
    a batch pushed in process has them)."""
    needs_run, needs_messages = _lacks(batch)
    run = Run.objects.filter(pk=batch.run_id).first() if needs_run else batch.run
    messages = dict(batch.messages)
    if needs_messages:
        messages.update(messages_of(batch.events))
    return _page_of(batch, run, messages)


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

    What is pushed (:mod:`~llm_conversations.runs.event_listener`) is taken
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
                    lacking = any(_lacks(batch))
                    if lacking:
                        page = await complete(batch)
                    else:
                        page = _page_of(batch, batch.run, dict(batch.messages))
                    yield page
                    if cursor.advance(page) is _Next.END:
                        return
                if cursor.beat():
                    yield None
                if must_read or cursor.poll_due():
                    following = _Next.READ
            if following is _Next.END:
                return


def started_call_ids(run_id: uuid.UUID | str) -> set[str]:
    """Ids of the calls whose tool may have started in an earlier attempt of the run."""
    return {
        str(data["tool_call"]["id"])
        for data in RunEvent.objects.filter(
            run_id=run_id, type=RunEventType.TOOL_CALL_STARTED
        ).values_list("data", flat=True)
    }
