"""The decision trail: who decided a call waiting for approval, when, why, on what.

``Run.decisions`` is what the loop acts on; a :class:`ToolDecision` row per
decided call is the record kept for audit, written in the same transaction:
the person (or ``None`` for the run's approval rule), the reason given, and
the digest of the calls that were waiting when the decision was made
(``Run.approval_digest``), so a decision made on a stale view is refused.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from llm_conversations.models.conversations import MAX_ID_CHARS
from llm_conversations.models.runs import Run
from llm_conversations.models.waiting_calls import Decision

__all__ = ["MAX_REASON_CHARS", "ToolDecision"]

MAX_REASON_CHARS = 2000


class ToolDecision(models.Model):
    """One decision on one call that waited for approval."""

    id = models.BigAutoField(_("ID"), primary_key=True)
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="tool_decisions", verbose_name=_("run")
    )
    call_id = models.CharField(_("tool call id"), max_length=MAX_ID_CHARS)
    tool_name = models.CharField(_("tool"), max_length=200)
    arguments = models.JSONField(_("arguments"), default=dict, blank=True)
    decision = models.CharField(_("decision"), max_length=16, choices=Decision.choices)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("decided by"),
    )
    # The run policy's rule decided, not a person (decided_by is empty then).
    by_rule = models.BooleanField(_("decided by rule"), default=False)
    reason = models.TextField(_("reason"), blank=True)
    digest = models.CharField(_("digest of the waiting calls"), max_length=64)
    decided_at = models.DateTimeField(_("decided at"), auto_now_add=True)

    class Meta:
        verbose_name = _("tool decision")
        verbose_name_plural = _("tool decisions")
        ordering = ["-decided_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "call_id"], name="llmconv_decision_once"),
            models.CheckConstraint(
                condition=models.Q(decision__in=[d.value for d in Decision]),
                name="llmconv_decision_known",
                violation_error_code="invalid_decision",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.call_id}: {self.decision}"
