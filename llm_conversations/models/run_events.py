"""The durable event log of a run: what happened, in order, for clients to follow.

Events are written inside the transactions that change the run (each holds the
run's row lock), so one run's events are committed in the order of their ids
and a reader that resumes after the last id it saw misses nothing.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

__all__ = ["DELTAS", "RunEvent", "RunEventType"]


class RunEventType(models.TextChoices):
    """What an event says; the name a Server-Sent Event carries."""

    RUN_RUNNING = "run.running", _("run started executing")
    RUN_FALLBACK = "run.fallback", _("a fallback provider entry answers")
    REASONING_DELTA = "reasoning.delta", _("reasoning text")
    TEXT_DELTA = "text.delta", _("text")
    TOOL_CALL_STARTED = "tool_call.started", _("tool call started")
    TOOL_CALL_PROGRESS = "tool_call.progress", _("tool call progress")
    TOOL_RESULT_STORED = "tool_result.stored", _("tool result stored")
    MESSAGE_STORED = "message.stored", _("message stored")
    RUN_REQUIRES_ACTION = "run.requires_action", _("run requires action")
    RUN_COMPLETED = "run.completed", _("run completed")
    RUN_FAILED = "run.failed", _("run failed")
    RUN_CANCELLED = "run.cancelled", _("run cancelled")

    @property
    def is_delta(self) -> bool:
        """Whether the event holds a piece of a reply being written (text or reasoning)."""
        return self in DELTAS

    @property
    def ends_stream(self) -> bool:
        """Whether the run stops executing after this event (it ended or waits)."""
        return self in _ENDING


DELTAS = frozenset({RunEventType.REASONING_DELTA, RunEventType.TEXT_DELTA})
"""The events that hold pieces of a reply as the model writes it."""

_ENDING = frozenset(
    {
        RunEventType.RUN_REQUIRES_ACTION,
        RunEventType.RUN_COMPLETED,
        RunEventType.RUN_FAILED,
        RunEventType.RUN_CANCELLED,
    }
)


class RunEvent(models.Model):
    """One event of a run; ``id`` orders the events of a run and resumes a reader.

    ``data`` holds ids, not copies: ``{"message": <id>}`` for stored turns,
    ``{"delta": <text>}`` for text and reasoning text, ``{"tool_call": <wire form>}`` for a call
    about to run, ``{"tool_call_id": <id>, "text": <text>, "fraction": <0..1 or null>}``
    for a tool's progress report, ``{"attempt": n}`` when a worker starts executing,
    ``{"from_entry": <entry>, "to_entry": <entry>, "reason": <word>}`` when a model call moves
    to a fallback entry.
    """

    id = models.BigAutoField(_("ID"), primary_key=True)
    run = models.ForeignKey(
        "llm_conversations.Run",
        on_delete=models.CASCADE,
        related_name="events",
        verbose_name=_("run"),
    )
    type = models.CharField(_("type"), max_length=40, choices=RunEventType)
    data = models.JSONField(_("data"), default=dict, blank=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now, db_index=True)

    class Meta:
        verbose_name = _("run event")
        verbose_name_plural = _("run events")
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "id"], name="llmconv_event_run_id")]

    def __str__(self) -> str:
        return f"{self.type} #{self.id}"
