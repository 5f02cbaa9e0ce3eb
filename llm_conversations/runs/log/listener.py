"""Pushing run events to their readers: one shared ``LISTEN`` per process, and local pushes.

What the engine logs reaches the readers of a run without a query, as a
:class:`~llm_conversations.runs.log.pushes.Pushed` batch handed to each
waiting reader once committed. Events this process logs are pushed in process
(:func:`publish`, with the stored turns they name); on PostgreSQL every
process's writes are also sent as ``NOTIFY`` with the batch as payload
(:func:`notify_payload`), delivered at commit, and each process has one
:class:`EventListener`: a thread that ``LISTEN``\\s on a connection of its
own while anyone waits and pushes what another process wrote. It starts with
the first waiter and closes its connection when the last one leaves, so an
idle process holds no connection; a stream that executes its run here follows
it by local pushes alone and starts none.

The log stays the one durable source: a reader takes a pushed batch only when
it continues exactly where the reader stands (``after`` is its last id), and
reads the log otherwise: a batch whose writer did not know what came before,
one that overtook another, a payload too large for ``NOTIFY``, a waiter that
fell behind (:data:`~llm_conversations.runs.log.pushes.MAX_PUSHES` batches),
or a plain wake-up (listening started or stopped, so something may have been
missed). A waiter must subscribe before it reads, so nothing committed between
the read and the wait goes unnoticed; and it polls as well (``listening`` says
how often it may).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import connections, router
from django.utils.dateparse import parse_datetime
from rest_framework.utils.encoders import JSONEncoder

from llm_conversations.runs.log.pushes import Pushed, Waiter

__all__ = [
    "CHANNEL",
    "EventListener",
    "from_payload",
    "listen",
    "listener",
    "notifies",
    "notify_payload",
    "publish",
    "wake",
]

logger = logging.getLogger("llm_conversations.events")

CHANNEL = "llm_conversations_run_events"
"""The channel run events are notified on."""
RECONNECT_SECONDS = 1.0
# PostgreSQL refuses a NOTIFY payload of 8000 bytes or more.
MAX_PAYLOAD_BYTES = 7900


class EventListener:
    """Waiters by run id, and the thread that ``LISTEN``\\s for them on PostgreSQL."""

    def __init__(self) -> None:
        # Names this listener in the payloads of batches it was given in process.
        self.origin = f"{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lock = threading.Lock()
        self._waiters: dict[str, set[Waiter]] = {}
        self._woken = 0  # waiters that take wake-ups: the LISTEN thread runs for them
        self._thread: threading.Thread | None = None
        self._stop: threading.Event | None = None
        self._wakeup: tuple[socket.socket, socket.socket] | None = None
        self._listening = threading.Event()  # the current thread's

    @property
    def application_name(self) -> str:
        """What its ``LISTEN`` connection is called in ``pg_stat_activity``."""
        return f"llm_conversations listener {self.origin}"

    @property
    def listening(self) -> bool:
        """Whether notifications arrive now (a waiter may then poll rarely)."""
        return self._listening.is_set()

    @contextmanager
    def subscribe(self, run_id: uuid.UUID | str, *, local: bool = False) -> Iterator[Waiter]:
        """A waiter woken when events of the run may have been committed.

        ``local``: the reader follows the execution it drives in this thread, whose
        every write is pushed to it in process. It needs no ``LISTEN`` (none is
        started for it) and takes no wake-ups: what another process logs
        meanwhile (a cancel) stops the execution, after which the reader reads
        the log.
        """
        waiter = Waiter(str(run_id), wakes=not local)
        with self._lock:
            self._waiters.setdefault(waiter.run_id, set()).add(waiter)
            self._woken += waiter.wakes
            if waiter.wakes and _uses_notify() and self._thread is None:
                self._start()
        try:
            yield waiter
        finally:
            with self._lock:
                waiters = self._waiters.get(waiter.run_id, set())
                waiters.discard(waiter)
                if not waiters:
                    self._waiters.pop(waiter.run_id, None)
                self._woken -= waiter.wakes
                if not self._woken and self._thread is not None:
                    self._end()

    def wake(self, run_id: uuid.UUID | str | None = None) -> None:
        """Wake the waiters of one run (all of them when ``None``): they read the log."""
        for waiter in self._of(run_id):
            waiter.wake()

    def publish(self, batch: Pushed) -> None:
        """Push a committed batch to the waiters of its run."""
        for waiter in self._of(batch.run_id):
            waiter.push(batch)

    def _of(self, run_id: uuid.UUID | str | None) -> list[Waiter]:
        with self._lock:
            if run_id is None:
                return [w for group in self._waiters.values() for w in group]
            return list(self._waiters.get(str(run_id), ()))

    def _notified(self, payload: str | None) -> None:
        """What the ``LISTEN`` connection received: a batch another process wrote, or
        ``None`` when listening started or ended (every waiter reads the log)."""
        if payload is None:
            self.wake()
        elif not payload.startswith("{"):
            self.wake(payload)  # a run's id: its batch did not fit
        else:
            try:
                batch = from_payload(payload, self.origin)
            except ValueError:
                logger.warning("A run event notification could not be read; readers read the log")
                self.wake()
                return
            if batch is not None:
                self.publish(batch)

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
        # A thread that saw the stop first (waiting to listen again after a lost
        # connection) has closed its end already: it is stopping, nothing to wake.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._wakeup[1].send(b"\0")
        self._wakeup[1].close()
        self._thread = self._stop = self._wakeup = None

    def _listen(
        self, stop: threading.Event, wakeup: socket.socket, listening: threading.Event
    ) -> None:
        alias = router.db_for_read(_run_event_model())
        listen(CHANNEL, alias, stop, wakeup, listening, self._notified, self.application_name)


def listen(
    channel: str,
    alias: str,
    stop: threading.Event,
    wakeup: socket.socket,
    listening: threading.Event,
    notified: Callable[[str | None], None],
    application_name: str = "llm_conversations listener",
) -> None:
    """``LISTEN`` on ``channel`` over a connection of its own to database ``alias`` until
    ``stop`` is set (and ``wakeup`` written to, so it stops at once).

    ``notified(payload)`` for each notification; ``notified(None)`` whenever
    listening starts or ends, because what was sent meanwhile was missed and
    must be found by a read. ``listening`` is set while notifications arrive.
    A dropped connection is made again after ``RECONNECT_SECONDS``. The
    connection is called ``application_name`` where PostgreSQL lists sessions.
    """
    import psycopg

    def listen_once() -> None:
        params = dict(connections[alias].get_connection_params())
        params.pop("cursor_factory", None)  # Django's cursor classes need its wrapper
        params.pop("context", None)
        params["application_name"] = application_name
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
    """Whether run events are notified (:func:`notify_payload`, sent by the log's writer)."""
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
    """Wake this process's waiters of the run: they read its log."""
    listener.wake(run_id)


def publish(batch: Pushed) -> None:
    """Push a batch this process committed to its waiters of the run."""
    listener.publish(batch)


def notify_payload(batch: Pushed) -> str:
    """The ``NOTIFY`` payload of a batch: its events whole, or only the run's id when
    they do not fit (readers then read the log)."""
    events = [[e.id, e.type, e.data, e.created_at] for e in batch.events]
    data = {"o": listener.origin, "r": batch.run_id, "a": batch.after, "e": events}
    payload = json.dumps(data, cls=JSONEncoder, separators=(",", ":"))
    return payload if len(payload.encode()) <= MAX_PAYLOAD_BYTES else batch.run_id


def _moment(text: str) -> datetime:
    moment = parse_datetime(text)
    if moment is None:
        raise ValueError(f"not a moment: {text!r}")
    return moment


def from_payload(payload: str, origin: str) -> Pushed | None:
    """The batch a :func:`notify_payload` carries; ``None`` when the listener named
    ``origin`` sent it (it was pushed in process already). ``ValueError`` for one it
    cannot read."""
    from llm_conversations.models import RunEvent

    try:
        data = json.loads(payload)
        if data["o"] == origin:
            return None
        run_id = str(data["r"])
        events = [
            RunEvent(id=i, run_id=run_id, type=t, data=d, created_at=_moment(c))
            for i, t, d, c in data["e"]
        ]
        after = data["a"]
    except (KeyError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    if not events or not (after is None or isinstance(after, int)):
        raise ValueError("a notification without events")
    return Pushed(run_id, after, events)
