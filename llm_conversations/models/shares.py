"""Share links: read-only, revocable links to a snapshot of a conversation.

A :class:`ShareLink` names the messages its snapshot showed when it was made
(:class:`SharedMessage` rows): a message stored later never shows through the
link, even at a position a rolled-back turn had, and a message hidden or
removed since no longer shows. A link works while it is neither revoked nor
expired and its conversation is not in the trash. The link's token is shown
once, when it is made; the database keeps only its SHA-256 (``token_hash``),
so nothing stored is a usable link. Making, resolving, revoking and copying
belong to :mod:`llm_conversations.conversations.shares`.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

__all__ = ["TOKEN_HASH_CHARS", "ShareLink", "ShareLinkQuerySet", "SharedMessage"]

# A SHA-256 in hexadecimal.
TOKEN_HASH_CHARS = 64


class ShareLinkQuerySet(models.QuerySet["ShareLink"]):
    """Share links, with the filter of those that work and the count of what they show."""

    def usable(self, now: datetime | None = None) -> ShareLinkQuerySet:
        """The links that show their snapshot now: not revoked, not expired, their
        conversation not in the trash (:meth:`ShareLink.is_usable` says the same of
        one link)."""
        moment = timezone.now() if now is None else now
        return self.filter(revoked_at__isnull=True, conversation__trashed_at__isnull=True).filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=moment)
        )

    def with_shown_count(self) -> ShareLinkQuerySet:
        """Each link with ``shown_count``: how many messages it shows now (one subquery,
        not a query per link)."""
        shown = (
            SharedMessage.objects.filter(link=OuterRef("pk"), message__hidden_at__isnull=True)
            .order_by()
            .values("link")
            .annotate(count=Count("pk"))
            .values("count")
        )
        return self.annotate(shown_count=Coalesce(Subquery(shown), 0))


class ShareLink(models.Model):
    """A link to the messages of a conversation its :class:`SharedMessage` rows name.

    ``up_to_position`` is where the owner made it through (the position of
    the last message then). Usable until ``revoked_at`` is set or
    ``expires_at`` passes (never, when ``None``), and while the conversation
    is not in the trash. ``created_by`` is the conversation's owner who made it.
    """

    id = models.UUIDField(_("ID"), primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        "llm_conversations.Conversation",
        on_delete=models.CASCADE,
        related_name="share_links",
        verbose_name=_("conversation"),
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="llm_share_links",
        verbose_name=_("created by"),
    )
    token_hash = models.CharField(
        _("token hash"), max_length=TOKEN_HASH_CHARS, unique=True, editable=False
    )
    up_to_position = models.PositiveIntegerField(_("up to position"))
    expires_at = models.DateTimeField(_("expires at"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now, editable=False)

    objects = ShareLinkQuerySet.as_manager()

    class Meta:
        verbose_name = _("share link")
        verbose_name_plural = _("share links")
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["conversation", "-created_at"], name="llmconv_share_conversation")
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(expires_at__isnull=True) | Q(expires_at__gt=F("created_at")),
                name="llmconv_share_expires_after_created",
                violation_error_code="invalid_expiry",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} ≤ {self.up_to_position}"

    def is_usable(self, now: datetime | None = None) -> bool:
        """Whether the link shows its snapshot now: not revoked, not expired, its
        conversation not in the trash (reads ``conversation``: select it with the link)."""
        moment = timezone.now() if now is None else now
        return (
            self.revoked_at is None
            and (self.expires_at is None or self.expires_at > moment)
            and self.conversation.trashed_at is None
        )


class SharedMessage(models.Model):
    """A message a link's snapshot showed when the link was made.

    Named by id, never by position: a rolled-back turn's position is taken by
    the next turn, its id never. A message deleted takes its rows here with it.
    """

    link = models.ForeignKey(
        ShareLink, on_delete=models.CASCADE, related_name="entries", verbose_name=_("share link")
    )
    message = models.ForeignKey(
        "llm_conversations.Message",
        on_delete=models.CASCADE,
        related_name="share_entries",
        verbose_name=_("message"),
    )

    class Meta:
        verbose_name = _("shared message")
        verbose_name_plural = _("shared messages")
        constraints = [
            # Also the index that reads a link's messages.
            models.UniqueConstraint(
                fields=["link", "message"], name="llmconv_shared_message_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.link_id} → {self.message_id}"
