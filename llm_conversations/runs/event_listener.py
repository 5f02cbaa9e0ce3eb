"""Waking readers of run events: one shared ``LISTEN`` per process, and local wake-ups.

On PostgreSQL every stored run event sends ``NOTIFY`` with its run's id
(migration 0004, a trigger), delivered at commit. Instead of a connection per
waiting reader, a process has one :class:`EventListener`: a thread that
``LISTEN``\\s on a connection of its own while anyone waits and wakes the
waiters of the run named. It starts with the first waiter and closes its
connection when the last one leaves, so an idle process holds no connection.

Events logged by this process also wake its waiters once committed
(:func:`wake`), on every database: a stream served by the process that
executes the run does not wait for a poll.

A waiter only learns that something may have been committed; it then reads
the log. It must subscribe before it reads, so nothing committed between the
read and the wait goes unnoticed; and it polls as well (``listening`` says how
often it may), should the listening connection drop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import selectors
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections, router

__all__ = ["CHANNEL", "EventListener", "Waiter", "listen", "listener", "notifies", "wake"]

logger = logging.getLogger("llm_conversations.events")

CHANNEL = "llm_conversations_run_events"
"""The channel of the trigger of migration 0004."""
RECONNECT_SECONDS = 1.0


class Waiter:
    """One reader's wake-up: a thread waits with :meth:`wait`, a coroutine with :meth:`await_`."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._event = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async_event: asyncio.Event | None = None

    def bind(self) -> None:
        """Make the waiter awaitable from the running event loop."""
        self._loop = asyncio.get_running_loop()
        self._async_event = asyncio.Event()

    def wake(self) -> None:
        """Safe from any thread."""
        self._event.set()
        if self._loop is not None and self._async_event is not None:
            # A closed loop raises: nobody waits there any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._async_event.set)

    def clear(self) -> None:
        """Forget earlier wake-ups; call it before reading."""
        self._event.clear()
        if self._async_event is not None:
            self._async_event.clear()

    def wait(self, timeout: float) -> bool:
        """Block until woken or ``timeout`` seconds pass; True when woken."""
        return self._event.wait(timeout)

    async def await_(self, timeout: float) -> bool:
        """:meth:`wait` for a coroutine (after :meth:`bind`)."""
        assert self._async_event is not None, "bind() first"
        try:
            await asyncio.wait_for(self._async_event.wait(), timeout)
        except TimeoutError:
            return False
        return True


class EventListener:
    """Waiters by run id, and the thread that ``LISTEN``\\s for them on PostgreSQL."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[Waiter]] = {}
        self._thread: threading.Thread | None = None
        self._stop: threading.Event | None = None
        self._wakeup: tuple[socket.socket, socket.socket] | None = None
        self._listening = threading.Event()  # the current thread's

    @property
    def listening(self) -> bool:
        """Whether notifications arrive now (a waiter may then poll rarely)."""
        return self._listening.is_set()

    @contextmanager
    def subscribe(self, run_id: uuid.UUID | str) -> Iterator[Waiter]:
        """A waiter woken when events of the run may have been committed."""
        waiter = Waiter(str(run_id))
        with self._lock:
            self._waiters.setdefault(waiter.run_id, set()).add(waiter)
            if _uses_notify() and self._thread is None:
                self._start()
        try:
            yield waiter
        finally:
            with self._lock:
                waiters = self._waiters.get(waiter.run_id, set())
                waiters.discard(waiter)
                if not waiters:
                    self._waiters.pop(waiter.run_id, None)
                if not self._waiters and self._thread is not None:
                    self._end()

    def wake(self, run_id: uuid.UUID | str | None = None) -> None:
        """Wake the waiters of one run (all of them when ``None``)."""
        with self._lock:
            if run_id is None:
                waiters = [w for group in self._waiters.values() for w in group]
            else:
                waiters = list(self._waiters.get(str(run_id), ()))
        for waiter in waiters:
            waiter.wake()

    # The listening thread ---------------------------------------------------

    def _start(self) -> None:
        self._stop = threading.Event()
        self._wakeup = socket.socketpair()
        self._listening = threading.Event()
        self._thread = threading.Thread(
            target=self._listen,
            args=(self._stop, self._wakeup[0], self._listening),
            name="llm-conversations-listener",
            daemon=True,
        )
        self._thread.start()

    def _end(self) -> None:
        # Under the lock. The thread closes its connection at once, woken through
        # the socket pair; a waiter arriving later starts a new thread.
        assert self._stop is not None
        assert self._wakeup is not None
        self._stop.set()
        self._wakeup[1].send(b"\0")
        self._wakeup[1].close()
        self._thread = self._stop = self._wakeup = None

    def _listen(
        self, stop: threading.Event, wakeup: socket.socket, listening: threading.Event
    ) -> None:
        alias = router.db_for_read(_run_event_model())
        listen(CHANNEL, alias, stop, wakeup, listening, self.wake)


def listen(
    channel: str,
    alias: str,
    stop: threading.Event,
    wakeup: socket.socket,
    listening: threading.Event,
    notified: Callable[[str | None], None],
) -> None:
    """``LISTEN`` on ``channel`` over a connection of its own to database ``alias`` until
    ``stop`` is set (and ``wakeup`` written to, so it stops at once).

    ``notified(payload)`` for each notification; ``notified(None)`` whenever
    listening starts or ends, because what was sent meanwhile was missed and
    must be found by a read. ``listening`` is set while notifications arrive.
    A dropped connection is made again after ``RECONNECT_SECONDS``.
    """
    import psycopg

    def listen_once() -> None:
        params = dict(connections[alias].get_connection_params())
        params.pop("cursor_factory", None)  # Django's cursor classes need its wrapper
        params.pop("context", None)
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(f"LISTEN {channel}")
            listening.set()
            notified(None)  # read again: nothing committed before LISTEN is missed
            with selectors.DefaultSelector() as selector:
                selector.register(conn.fileno(), selectors.EVENT_READ)
                selector.register(wakeup, selectors.EVENT_READ)
                while not stop.is_set():
                    selector.select(timeout=RECONNECT_SECONDS)
                    for notify in conn.notifies(timeout=0):
                        notified(notify.payload)

    try:
        while not stop.is_set():
            try:
                listen_once()
            except Exception:
                logger.warning("Listening on %s failed; polling meanwhile", channel, exc_info=True)
            listening.clear()
            notified(None)
            stop.wait(RECONNECT_SECONDS)
    finally:
        wakeup.close()


def _run_event_model() -> Any:
    from llm_conversations.models import RunEvent

    return RunEvent


def _uses_notify() -> bool:
    """Whether run events are notified (the trigger of migration 0004 sends them)."""
    return notifies(router.db_for_read(_run_event_model()))


def notifies(alias: str) -> bool:
    """Whether database ``alias`` can push: PostgreSQL through psycopg 3."""
    if connections[alias].vendor != "postgresql":
        return False
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return bool(is_psycopg3)


listener = EventListener()
"""The process's listener."""


def wake(run_id: uuid.UUID | str) -> None:
    """Wake this process's waiters of the run (events of it were just committed)."""
    listener.wake(run_id)
