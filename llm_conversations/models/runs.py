"""Runs of the tool loop and the typed state they keep.

A run's state is read and written only through the values and methods here:
statuses, why it ended, why it waits, the operator's decisions, the calls it
waits on, the tools it offered and its parameters. Nothing else parses the
JSON columns.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Final

from django.db import IntegrityError, models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from llm_conversations.core.model_info import COST_DECIMALS, COST_DIGITS
from llm_conversations.core.parameters import RunParameters
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import RunStateError
from llm_conversations.models.run_events import RunEventType
from llm_conversations.models.waiting_calls import (
    Decision,
    WaitingCallsField,
    WaitReason,
    approval_digest,
)

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "ENDED_RUN_STATUSES",
    "RUN_MOVES",
    "Run",
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
ONE_ACTIVE_RUN = "llmconv_one_active_run"


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


class Run(models.Model):
    """One execution of the tool loop for one new user turn.

    Every message the run stores points to it. At most one run per
    conversation is active (queued, running or waiting for action); the
    database enforces it with a conditional unique constraint.
    """

    id = models.UUIDField(_("ID"), primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        "llm_conversations.Conversation",
        on_delete=models.CASCADE,
        related_name="runs",
        verbose_name=_("conversation"),
    )
    status = models.CharField(
        _("status"), max_length=20, choices=RunStatus, default=RunStatus.QUEUED
    )
    termination_reason = models.CharField(
        _("termination reason"), max_length=40, blank=True, choices=TerminationReason
    )
    provider = models.CharField(_("provider"), max_length=100, blank=True)
    model = models.CharField(_("model"), max_length=200, blank=True)
    # The PROVIDERS entry that answered the last model call: the run's own, or
    # one of its FALLBACKS when that failed; and how many times a call moved
    # to a fallback (each one logged as run.fallback).
    answered_by = models.CharField(_("answered by"), max_length=100, blank=True)
    fallbacks = models.PositiveIntegerField(_("fallbacks taken"), default=0)
    # Set once a run.running or run.fallback supersedes text the log holds, so
    # readers of every other run's log never look for superseded text.
    superseded_text = models.BooleanField(_("text superseded"), default=False, editable=False)
    # The tools offered: ToolSpec stored forms; read through offered_tools.
    tools = models.JSONField(_("tools offered"), default=list, blank=True)
    max_iterations = models.PositiveIntegerField(_("max iterations"), default=8)
    # The run's own system prompt, sent first on every call, never stored as a
    # message; and its other parameters (RunParameters stored form, without
    # instructions; a model only when the run asked for one, while the model
    # column records the model used). Read through run_parameters.
    instructions = models.TextField(_("instructions"), blank=True)
    parameters = models.JSONField(_("parameters"), default=dict, blank=True)
    iterations = models.PositiveIntegerField(_("iterations"), default=0)
    input_tokens = models.PositiveIntegerField(_("input tokens"), default=0)
    output_tokens = models.PositiveIntegerField(_("output tokens"), default=0)
    total_tokens = models.PositiveIntegerField(_("total tokens"), default=0)
    cached_tokens = models.PositiveIntegerField(_("cached tokens"), default=0)
    cache_write_tokens = models.PositiveIntegerField(_("cache write tokens"), default=0)
    reasoning_tokens = models.PositiveIntegerField(_("reasoning tokens"), default=0)
    # Dollars: the sum of its priced turns' costs.
    cost = models.DecimalField(
        _("cost"), max_digits=COST_DIGITS, decimal_places=COST_DECIMALS, default=Decimal(0)
    )
    # Fitting the context window (docs/context.md): the strategy asked for
    # ("" = the provider entry's CONTEXT_STRATEGY), and what the last model
    # call sent: its first message's position after kept system messages (0:
    # all), the summary sent in place of the turns before it, its estimated
    # input tokens and the provider's count.
    context_strategy = models.CharField(_("context strategy"), max_length=20, blank=True)
    context_first_position = models.PositiveIntegerField(
        _("first position sent"), null=True, blank=True
    )
    context_summary = models.ForeignKey(
        "llm_conversations.ConversationSummary",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("summary sent"),
    )
    context_estimated_tokens = models.PositiveIntegerField(
        _("estimated input tokens"), null=True, blank=True
    )
    context_reported_tokens = models.PositiveIntegerField(
        _("reported input tokens"), null=True, blank=True
    )
    error_type = models.CharField(_("error type"), max_length=100, blank=True)
    error_message = models.TextField(_("error message"), blank=True)
    # The calls a paused run waits on, as WaitingCall values.
    waiting_calls = WaitingCallsField(_("waiting calls"), default=list, blank=True)
    # Decision values by call id; read through decision().
    decisions = models.JSONField(_("decisions"), default=dict, blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    # Who executes the run and until when (renewed while it works); a run whose
    # lease expired is requeued by the reaper, up to MAX_ATTEMPTS attempts.
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    lease_owner = models.CharField(_("lease owner"), max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(_("lease expires at"), null=True, blank=True)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    # When a task was last enqueued to execute the run in the background: a run
    # still queued REQUEUE_SECONDS later gets another task from the reaper (a
    # worker may have taken the first and died before claiming the run).
    enqueued_at = models.DateTimeField(_("enqueued at"), null=True, blank=True)
    # When the run last became queued (started, decided, retried, requeued). A
    # run with no task (enqueued_at empty: it was to run in its request) still
    # queued REQUEUE_SECONDS later gets one: the process that held it died.
    queued_at = models.DateTimeField(_("queued at"), null=True, blank=True)
    # Busy conversations (docs/busy-conversations.md): a waiting run keeps its
    # user turn here ({"message": stored form, "metadata": {...}}) until it is
    # started, and names the run it waits behind; a run that interrupted
    # another names it.
    waiting_turn = models.JSONField(_("waiting user turn"), default=dict, blank=True)
    waits_for = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("waits for"),
    )
    replaced = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("interrupted run"),
    )

    class Meta:
        verbose_name = _("run")
        verbose_name_plural = _("runs")
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(status__in=ACTIVE_RUN_STATUSES),
                name=ONE_ACTIVE_RUN,
                violation_error_code="conversation_busy",
            ),
        ]
        indexes = [models.Index(fields=["conversation", "-created_at"], name="llmconv_run_recent")]

    def __str__(self) -> str:
        return f"Run {self.id} ({self.status})"

    @staticmethod
    def violates_one_active_run(error: IntegrityError) -> bool:
        """Whether ``error`` is a violation of the one-active-run constraint.

        PostgreSQL names the constraint; SQLite names the indexed column.
        """
        diag = getattr(error.__cause__, "diag", None)
        if getattr(diag, "constraint_name", None) == ONE_ACTIVE_RUN:
            return True
        text = str(error)
        return ONE_ACTIVE_RUN in text or "llm_conversations_run.conversation_id" in text

    @property
    def is_active(self) -> bool:
        """Queued, running or waiting for action."""
        return self.status in ACTIVE_RUN_STATUSES

    # Offered tools -------------------------------------------------------------

    @property
    def offered_tools(self) -> list[ToolSpec]:
        """The tools this run offers the model, in order."""
        return [ToolSpec.from_dict(item) for item in self.tools]

    @offered_tools.setter
    def offered_tools(self, specs: Iterable[ToolSpec]) -> None:
        self.tools = [spec.to_stored() for spec in specs]

    @property
    def offered_tool_names(self) -> list[str]:
        """Names of the offered tools, in order."""
        return [spec.name for spec in self.offered_tools]

    # Parameters ------------------------------------------------------------------

    @property
    def run_parameters(self) -> RunParameters:
        """What every model call of this run asks for: instructions, model, sampling,
        tool choice, response format."""
        return RunParameters.from_input(
            {**self.parameters, "instructions": self.instructions or None}
        )

    @run_parameters.setter
    def run_parameters(self, parameters: RunParameters) -> None:
        stored = parameters.to_stored()
        self.instructions = stored.pop("instructions", "")
        if "model" in stored:
            self.model = stored["model"]
        self.parameters = stored

    # Waiting calls ---------------------------------------------------------------

    @property
    def approval_digest(self) -> str | None:
        """The :func:`approval_digest` of the calls this run waits on."""
        return approval_digest(self.waiting_calls)

    def take_waiting(self, reason: WaitReason, chosen: Iterable[str] | None) -> list[str]:
        """Take ``chosen`` calls (all that wait for ``reason`` when ``None``) off the list.

        Returns their ids in call order and sets the status that follows:
        still waiting while other calls wait, queued otherwise. Raises
        :class:`RunStateError` ``unknown_tool_call`` for ids not waiting for ``reason``.
        """
        waiting = self.waiting_calls
        awaiting = [p.call.id for p in waiting if p.reason == reason]
        taken = list(awaiting if chosen is None else chosen)
        unknown = [i for i in taken if i not in awaiting]
        if unknown or not taken:
            raise RunStateError(
                "unknown_tool_call",
                f"no call waiting ({reason.value}) has id {', '.join(unknown) or '(none given)'}; "
                f"waiting: {', '.join(awaiting) or 'none'}.",
            )
        taken = [i for i in awaiting if i in taken]  # call order, each once
        left = [p for p in waiting if p.call.id not in taken]
        self.waiting_calls = left
        if left:
            self.status = RunStatus.REQUIRES_ACTION
        else:
            # A new stretch of execution: its attempts are counted afresh.
            self.status, self.queued_at, self.attempts = RunStatus.QUEUED, timezone.now(), 0
        return taken

    # Decisions -------------------------------------------------------------------

    def decision(self, call_id: str) -> Decision | None:
        """The operator's decision on ``call_id``, if one was made."""
        value = self.decisions.get(call_id)
        return Decision(value) if value is not None else None

    def record_decisions(self, call_ids: Iterable[str], decision: Decision) -> None:
        """Record ``decision`` for each call."""
        self.decisions = {**self.decisions, **dict.fromkeys(call_ids, decision.value)}
