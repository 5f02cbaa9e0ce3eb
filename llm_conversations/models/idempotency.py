"""Idempotency keys: the first answer to a request, replayed when a client repeats it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

__all__ = ["IdempotencyKey"]


class IdempotencyKey(models.Model):
    """A request a user sent with an ``Idempotency-Key`` header, and its answer.

    ``status`` is ``None`` while the first request is still being answered.
    Keys are per user; one older than ``IDEMPOTENCY_KEY_TTL`` seconds is
    treated as unknown and pruned.
    """

    id = models.BigAutoField(_("ID"), primary_key=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("user"),
    )
    key = models.CharField(_("key"), max_length=255)
    request = models.CharField(_("method and path"), max_length=2048)
    body_hash = models.CharField(_("body hash"), max_length=64)
    status = models.PositiveSmallIntegerField(_("status"), null=True, blank=True)
    response = models.JSONField(_("response"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now, db_index=True)

    class Meta:
        verbose_name = _("idempotency key")
        verbose_name_plural = _("idempotency keys")
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="llmconv_one_idempotency_key")
        ]

    def __str__(self) -> str:
        return self.key
