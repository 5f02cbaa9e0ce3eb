"""A circuit breaker per provider entry: a dead provider is skipped quickly.

After ``failures`` calls in a row that ended in a retryable error (after the
entry's own retries), the breaker opens: the entry is skipped for
``reset_after`` seconds. Then it is half-open: one call is let through as a
trial; its success closes the breaker, its failure opens it again.

State is kept per process (each worker learns on its own that a provider is
down, after ``failures`` calls of its own); the lock makes it safe for the
threads of one process. The clock is injectable so tests need not sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BreakerSettings", "CircuitBreaker"]


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    """A ``CIRCUIT_BREAKER`` entry setting: ``{"FAILURES": 5, "RESET_AFTER": 30}``."""

    failures: int
    """Retryable failures in a row that open the breaker."""
    reset_after: float
    """Seconds an open breaker skips the entry before a trial call."""


class CircuitBreaker:
    """Whether calls to one provider entry are let through, from their recent outcomes."""

    def __init__(
        self, settings: BreakerSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._trial = False

    @property
    def is_open(self) -> bool:
        """Whether the breaker is open (a trial may be due: see :meth:`allow`)."""
        with self._lock:
            return self._opened_at is not None

    def allow(self) -> bool:
        """Whether a call may be made now; once reset, the first caller gets the one trial."""
        with self._lock:
            if self._opened_at is None:
                return True
            if self._trial or self._clock() - self._opened_at < self.settings.reset_after:
                return False
            self._trial = True
            return True

    def succeeded(self) -> None:
        """The call was answered (an answer refusing the request counts): close the breaker."""
        with self._lock:
            self._failures, self._opened_at, self._trial = 0, None, False

    def failed(self) -> None:
        """The call ended in a retryable error: count it; open at the limit or a failed trial."""
        with self._lock:
            self._failures += 1
            if self._trial or self._failures >= self.settings.failures:
                self._opened_at, self._trial = self._clock(), False

    def release(self) -> None:
        """A call let through ended without an outcome (interrupted): free its trial."""
        with self._lock:
            self._trial = False
