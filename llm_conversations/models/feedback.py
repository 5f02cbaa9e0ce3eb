"""Feedback: a user's rating of an assistant turn, with an optional comment.

One row per user and message (a unique constraint); rating it again changes
that row. Only assistant turns can be rated: a rule across two tables, so the
feedback service applies it (:mod:`llm_conversations.conversations.feedback`), while
the rating's values are a ``CheckConstraint`` here.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

__all__ = ["MAX_COMMENT_CHARS", "Feedback", "Rating"]

# The longest comment a rating may carry.
MAX_COMMENT_CHARS = 2000


class Rating(models.IntegerChoices):
    """A thumbs up or a thumbs down."""

    UP = 1, _("+1 (good)")
    DOWN = -1, _("-1 (bad)")


class Feedback(models.Model):
    """A user's rating of one assistant message, changeable, one per user and message."""

    id = models.BigAutoField(_("ID"), primary_key=True)
    message = models.ForeignKey(
        "llm_conversations.Message",
        on_delete=models.CASCADE,
        related_name="feedback",
        verbose_name=_("message"),
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("user"),
    )
    rating = models.SmallIntegerField(_("rating"), choices=Rating)
    comment = models.TextField(_("comment"), blank=True, max_length=MAX_COMMENT_CHARS)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("feedback")
        verbose_name_plural = _("feedback")
        ordering = ["-updated_at"]
        constraints = [
            # Also the index that finds a message's feedback.
            models.UniqueConstraint(
                fields=["message", "user"],
                name="llmconv_one_feedback_per_user",
                violation_error_code="duplicate_feedback",
            ),
            models.CheckConstraint(
                condition=Q(rating__in=Rating.values),
                name="llmconv_feedback_rating_valid",
                violation_error_code="invalid_rating",
            ),
        ]
        indexes = [models.Index(fields=["rating", "-updated_at"], name="llmconv_feedback_rating")]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} #{self.message_id}"
