"""Runs of the tool loop and the typed state they keep.

A run's state is read and written only through ``Run``'s methods and the values
they take: its status and why it ended (``run_states.py``), the calls it waits
on, why, and the operator's decisions (``waiting_calls.py``), the tools it
offered and its parameters. Nothing else parses the JSON columns.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from decimal import Decimal

from django.db import IntegrityError, models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from llm_conversations.core.model_info import COST_DECIMALS, COST_DIGITS
from llm_conversations.core.parameters import RunParameters
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import RunStateError
from llm_conversations.models.run_states import (
    ACTIVE_RUN_STATUSES,
    RunStatus,
    TerminationReason,
)
from llm_conversations.models.waiting_calls import (
    Decision,
    WaitingCallsField,
    WaitReason,
    approval_digest,
)

__all__ = ["Run"]


ONE_ACTIVE_RUN = "llmconv_one_active_run"


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
