"""What may end a provider call before its own timeouts: its run's deadline and stop.

A provider's ``TIMEOUT`` bounds each wait for the network, and a non-streamed
attempt as a whole; a stream that keeps sending (keep-alive comments, pings, a
character at a time) is bounded by neither. The run that makes the call knows
more: when its ``RUN_TIMEOUT`` ends and whether it was cancelled or taken over.
An :class:`Interrupt` carries both into the call, which checks it as bytes
arrive and shortens its network waits to the time left.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from llm_conversations.exceptions import CallInterrupted

__all__ = ["NO_INTERRUPT", "Interrupt"]


@dataclass(frozen=True, slots=True)
class Interrupt:
    """``deadline`` is a :func:`time.monotonic` value; setting any of ``stops`` stops
    the call (the run's own stop, and the caller's when it gives the call up)."""

    deadline: float | None = None
    stops: tuple[threading.Event, ...] = ()

    def remaining(self) -> float | None:
        """Seconds left until the deadline (never below zero); ``None`` without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def passed(self) -> bool:
        """Whether the deadline has passed."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def check(self) -> None:
        """Raise :class:`CallInterrupted` when the call must end now."""
        if any(stop.is_set() for stop in self.stops):
            raise CallInterrupted("run_stopped", "the run was stopped during the call.")
        if self.passed():
            raise CallInterrupted("run_timeout", "the run's deadline passed during the call.")


NO_INTERRUPT = Interrupt()
"""A call nothing but its own timeouts ends."""
