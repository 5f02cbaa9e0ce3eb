"""Slots for preparing runs: at most ``RUN_START_CONCURRENCY`` requests of one
process prepare runs at once.

A burst of run starts (hundreds of clients within a second) would otherwise
take every pooled database connection and most of the interpreter at once,
and every other request of the process (reads, cancels, event streams) would
wait for the whole burst: ``bench/load_runs.py`` measured reads waiting 2-3 s.
A request that starts or resumes a run takes a slot once it is authenticated
and throttled (a refused caller never holds one, however slow its password's
hash), before its run's database work, and gives it back when the run is
claimed for execution (a foreground run executes without one) or when the
request ends. A request that waits for a slot gives its pooled connection back
first (:func:`~llm_conversations.runs.live_connections.return_connection`). A
request waits in line, first come first served, so a burst is admitted rather
than sent back; it is refused with :class:`ServerBusy` (the API's 503
``server_busy``), having stored nothing, only when the line is full
(``RUN_START_QUEUE`` wait already: at once, rather than holding one more
thread) or after waiting ``RUN_START_WAIT_SECONDS``.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar, Token

from llm_conversations.conf import conf
from llm_conversations.exceptions import ServerBusy
from llm_conversations.runs.live_connections import return_connection

__all__ = ["Slot", "StartSlots", "give_back", "slots"]


class StartSlots:
    """The process's slots; how many there are follows ``RUN_START_CONCURRENCY``
    (``None``: no limit), read at each :meth:`take` so ``override_settings`` works."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._taken = 0
        self._waiting = 0

    @property
    def taken(self) -> int:
        """How many slots are held now."""
        return self._taken

    def take(self) -> Slot:
        """A slot, once one is free (first come, first served); :class:`ServerBusy`
        at once when ``RUN_START_QUEUE`` requests wait already, or after
        ``RUN_START_WAIT_SECONDS``. A caller that has to wait first gives its
        pooled connection back. The slot is also this context's, for
        :func:`give_back`."""
        size = conf.RUN_START_CONCURRENCY
        if size is not None and self._taken >= size:
            # About to wait: authentication's connection goes back to its pool meanwhile.
            return_connection()
        with self._condition:
            if size is not None and self._taken >= size:
                self._wait_in_line(size)
            self._taken += 1
        slot = Slot(self)
        slot.token = _current.set(slot)
        return slot

    def _wait_in_line(self, size: int) -> None:
        """Holding the condition: wait for a slot, unless the line is full."""
        line = conf.RUN_START_QUEUE
        if line is not None and self._waiting >= line:
            raise ServerBusy(
                f"{line} run start(s) wait in line in this process already; retry shortly."
            )
        self._waiting += 1
        try:
            admitted = self._condition.wait_for(
                lambda: self._taken < size, conf.RUN_START_WAIT_SECONDS
            )
        finally:
            self._waiting -= 1
        if not admitted:
            raise ServerBusy(
                f"more than {size} run(s) are being started in this process; retry shortly."
            )

    @property
    def waiting(self) -> int:
        """How many requests wait in line for a slot now."""
        return self._waiting

    def _give(self) -> None:
        with self._condition:
            self._taken -= 1
            self._condition.notify()


class Slot:
    """One request's slot; :meth:`release` gives it back, once however often it is called."""

    def __init__(self, slots: StartSlots) -> None:
        self._slots: StartSlots | None = slots
        self._lock = threading.Lock()
        self.token: Token[Slot | None] | None = None

    def release(self) -> None:
        """Give the slot back (a no-op after the first call)."""
        with self._lock:
            slots, self._slots = self._slots, None
        if slots is not None:
            slots._give()

    def close(self) -> None:
        """Give the slot back and stop being the context's slot: the request ended."""
        self.release()
        if self.token is not None:
            _current.reset(self.token)
            self.token = None


_current: ContextVar[Slot | None] = ContextVar("llm_conversations_start_slot", default=None)

slots = StartSlots()


def give_back() -> None:
    """Give back the slot this context took, if any: its run executes now, and
    executing a run is not preparing one."""
    slot = _current.get()
    if slot is not None:
        slot.release()
