"""Where a run stands and why it ended: its statuses, the one table of its moves
(:data:`RUN_MOVES`) and the end event of each end state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from django.db import models
from django.utils.translation import gettext_lazy as _

from llm_conversations.models.run_events import RunEventType

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "ENDED_RUN_STATUSES",
    "RUN_MOVES",
    "RunStatus",
    "TerminationReason",
]


class RunStatus(models.TextChoices):
    """Where a run of the tool loop stands, and the rules of its moves (:data:`RUN_MOVES`)."""

    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    REQUIRES_ACTION = "requires_action", _("Requires action")
    COMPLETED = "completed", _("Completed")
    FAILED = "failed", _("Failed")
    CANCELLED = "cancelled", _("Cancelled")
    # Stored behind the conversation's active run (busy strategy "enqueue"):
    # not active yet, so the one-active-run constraint does not count it.
    WAITING = "waiting", _("Waiting for the active run")

    @property
    def moves(self) -> frozenset[RunStatus]:
        """The statuses a run in this one may move to."""
        return RUN_MOVES[self]

    @property
    def reached_from(self) -> frozenset[RunStatus]:
        """The statuses a run may move to this one from."""
        return frozenset(status for status, moves in RUN_MOVES.items() if self in moves)

    @property
    def end_event(self) -> RunEventType | None:
        """The event a run's stream ends with in this status; ``None`` while it executes."""
        return _END_EVENTS.get(self)

    @classmethod
    def ended_by(cls, event: RunEventType) -> RunStatus:
        """The status a run is in after logging ``event``, an event that ends a stream."""
        return next(status for status, end in _END_EVENTS.items() if end is event)

    @property
    def executing(self) -> bool:
        """Whether the run may log more events without anyone acting on it: it waits
        for its turn, is queued for a worker, or runs."""
        return self.end_event is None


# The one table of a run's moves; beside each, who makes it.
RUN_MOVES: Final[Mapping[RunStatus, frozenset[RunStatus]]] = {
    RunStatus.WAITING: frozenset(
        {
            RunStatus.QUEUED,  # the run ahead ended: transitions.finish -> waiting_runs
            RunStatus.FAILED,  # its user turn can no longer be stored: transitions
            RunStatus.CANCELLED,  # transitions.cancel_run
        }
    ),
    RunStatus.QUEUED: frozenset(
        {
            RunStatus.RUNNING,  # a worker or a request claims it: leases.claim
            RunStatus.FAILED,  # transitions.finish
            RunStatus.CANCELLED,  # transitions.cancel_run, busy.replace_active
        }
    ),
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.QUEUED,  # its worker was lost: reaper.reap_runs
            RunStatus.REQUIRES_ACTION,  # transitions.pause
            RunStatus.COMPLETED,  # transitions.finish
            RunStatus.FAILED,  # transitions.finish (the loop, the reaper)
            RunStatus.CANCELLED,  # transitions.cancel_run, busy.replace_active
        }
    ),
    RunStatus.REQUIRES_ACTION: frozenset(
        {
            RunStatus.QUEUED,  # its calls were answered: decisions.answer_waiting
            RunStatus.FAILED,  # transitions.finish
            RunStatus.CANCELLED,  # transitions.cancel_run, busy.replace_active
        }
    ),
    RunStatus.FAILED: frozenset({RunStatus.QUEUED}),  # a retry: transitions.requeue_failed
    RunStatus.COMPLETED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}
_END_EVENTS: Final[Mapping[RunStatus, RunEventType]] = {
    RunStatus.REQUIRES_ACTION: RunEventType.RUN_REQUIRES_ACTION,
    RunStatus.COMPLETED: RunEventType.RUN_COMPLETED,
    RunStatus.FAILED: RunEventType.RUN_FAILED,
    RunStatus.CANCELLED: RunEventType.RUN_CANCELLED,
}

ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.REQUIRES_ACTION)
ENDED_RUN_STATUSES = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class TerminationReason(models.TextChoices):
    """Why a run ended."""

    COMPLETED = "completed", _("completed")
    MAX_ITERATIONS = "max_iterations", _("iteration limit reached")
    PROVIDER_ERROR = "provider_error", _("provider error")
    ERROR = "error", _("error")
    TIMEOUT = "timeout", _("run timed out")
    WORKER_LOST = "worker_lost", _("the worker executing it was lost")
    CONTENT_FILTER = "content_filter", _("refused or filtered by the provider")
    LENGTH = "length", _("output limit reached")
    INVALID_OUTPUT = "invalid_output", _("the answer did not match the response format")
    CANCELLED = "cancelled", _("cancelled")
    CONTEXT_OVERFLOW = "context_overflow", _("the conversation did not fit the context window")
    BUDGET_EXCEEDED = "budget_exceeded", _("a budget would be exceeded")
    # A run exported while queued, running or waiting, imported as cancelled.
    IMPORTED_UNFINISHED = "imported_unfinished", _("unfinished when it was exported")
    INTERRUPTED = "interrupted", _("interrupted by a new run")
    ROLLED_BACK = "rolled_back", _("interrupted by a new run, its turns removed")
