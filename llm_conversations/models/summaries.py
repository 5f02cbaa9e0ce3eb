"""Rolling summaries of a conversation's older turns, sent in their place.

A summary covers the conversation's first ``end_position`` messages (positions
``0`` to ``end_position - 1``); a longer one is made from the previous one and
the turns after it, when a run must leave out more. The messages themselves
are never changed.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from llm_conversations.core.model_info import COST_DECIMALS, COST_DIGITS

__all__ = ["ConversationSummary"]


class ConversationSummary(models.Model):
    """A summary of the first ``end_position`` messages of a conversation."""

    conversation = models.ForeignKey(
        "llm_conversations.Conversation",
        on_delete=models.CASCADE,
        related_name="summaries",
        verbose_name=_("conversation"),
    )
    end_position = models.PositiveIntegerField(_("covers messages before position"))
    content = models.TextField(_("content"))
    provider = models.CharField(_("provider"), max_length=100, blank=True)
    model = models.CharField(_("model"), max_length=200, blank=True)
    input_tokens = models.PositiveIntegerField(_("input tokens"), default=0)
    output_tokens = models.PositiveIntegerField(_("output tokens"), default=0)
    cost = models.DecimalField(
        _("cost"), max_digits=COST_DIGITS, decimal_places=COST_DECIMALS, null=True, blank=True
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("conversation summary")
        verbose_name_plural = _("conversation summaries")
        ordering = ["conversation", "-end_position"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "end_position"], name="llmconv_one_summary_per_end"
            ),
        ]

    def __str__(self) -> str:
        return f"Summary of messages 0-{self.end_position - 1}"
