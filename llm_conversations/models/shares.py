"""Share links: read-only, revocable links to a snapshot of a conversation.

A :class:`ShareLink` names a conversation and the last position its snapshot
shows; messages stored after it never show through the link. The link's
token is shown once, when it is made; the database keeps only its SHA-256
(``token_hash``), so nothing stored is a usable link. Making, resolving,
revoking and copying belong to :mod:`llm_conversations.conversations.sharing`.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

__all__ = ["TOKEN_HASH_CHARS", "ShareLink", "ShareLinkQuerySet"]

# A SHA-256 in hexadecimal.
TOKEN_HASH_CHARS = 64


class ShareLinkQuerySet(models.QuerySet["ShareLink"]):
    """Share links, with the filter of those that work."""

    def usable(self, now: datetime | None = None) -> ShareLinkQuerySet:
        """The links that show their snapshot now: not revoked, not expired
        (:meth:`ShareLink.is_usable` says the same of one link)."""
        moment = timezone.now() if now is None else now
        return self.filter(revoked_at__isnull=True).filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=moment)
        )


class ShareLink(models.Model):
    """A link to the first ``up_to_position + 1`` messages of a conversation.

    Usable until ``revoked_at`` is set or ``expires_at`` passes (never, when
    ``None``). ``created_by`` is the conversation's owner who made it.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
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
        """Whether the link shows its snapshot now: not revoked, not expired."""
        moment = timezone.now() if now is None else now
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > moment)
