"""What a reader of a run's log is handed without a query: :class:`Pushed` batches.

A batch is the events one transaction wrote and the id of the run's event
before them (``after``, when the writer knows it), handed to each waiting
reader once committed (:mod:`~llm_conversations.runs.log.listener` does the
handing). A :class:`Waiter` holds what was pushed to one reader, and wakes it:
a thread or a coroutine. A waiter that falls behind (:data:`MAX_PUSHES`
batches) forgets what it holds and is told to read the log instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llm_conversations.models import Message, Run, RunEvent

__all__ = ["MAX_PUSHES", "Pushed", "Waiter"]

MAX_PUSHES = 256
"""Batches a waiter holds before it is told to read the log instead."""


@dataclass(frozen=True)
class Pushed:
    """The events one committed transaction logged for a run, in id order.

    ``after`` is the id of the run's event before them, or ``None`` when the
    writer did not know it; ``messages`` the stored turns the events name, by
    id, and ``run`` the run as the writer left it, where the writer had them
    (in process; a reader reads what is missing).
    """

    run_id: str
    after: int | None
    events: Sequence[RunEvent]
    messages: Mapping[str, Message] = field(default_factory=dict)
    run: Run | None = None

    @property
    def last_id(self) -> int:
        return self.events[-1].id


class Waiter:
    """One reader's wake-up: a thread waits with :meth:`wait`, a coroutine with :meth:`await_`."""

    def __init__(self, run_id: str, *, wakes: bool = True) -> None:
        self.run_id = run_id
        self.wakes = wakes
        self._event = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async_event: asyncio.Event | None = None
        self._pushes: deque[Pushed] = deque()
        self._read_wanted = False
        self._lock = threading.Lock()

    def push(self, batch: Pushed) -> None:
        """Hand a committed batch over, and wake the reader (safe from any thread)."""
        with self._lock:
            if len(self._pushes) >= MAX_PUSHES:
                # Fallen behind: what it missed is in the log.
                self._pushes.clear()
                self._read_wanted = True
            elif not self._read_wanted:
                self._pushes.append(batch)
        self._signal()

    def take(self) -> tuple[list[Pushed], bool]:
        """The batches pushed since the last take, and whether the reader must read the
        log (it was woken to, or fell behind)."""
        with self._lock:
            batches, read = list(self._pushes), self._read_wanted
            self._pushes.clear()
            self._read_wanted = False
        return batches, read

    def bind(self) -> None:
        """Make the waiter awaitable from the running event loop."""
        self._loop = asyncio.get_running_loop()
        self._async_event = asyncio.Event()

    def wake(self) -> None:
        """Ask the reader to read the log (safe from any thread); nothing for one that
        does not take wake-ups."""
        if not self.wakes:
            return
        with self._lock:
            self._read_wanted = True
        self._signal()

    def _signal(self) -> None:
        self._event.set()
        if self._loop is not None and self._async_event is not None:
            # A closed loop raises: nobody waits there any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._async_event.set)

    def clear(self) -> None:
        """Forget earlier wake-ups; call it before reading the log (batches pushed
        meanwhile stay: the reader skips what its read held)."""
        with self._lock:
            self._read_wanted = False
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
