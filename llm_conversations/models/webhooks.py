"""Webhooks: an owner's endpoints, and each message sent to an endpoint with its outcome.

Endpoints come from two places: the ``WEBHOOKS`` setting (every run's events;
their secrets stay in the settings) and :class:`WebhookEndpoint` rows (the
events of one owner's runs). A :class:`WebhookDelivery` is one event for one
endpoint: its payload, attempts, the last response code or error, and when it
is next tried. See ``docs/webhooks.md``.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

__all__ = ["DeliveryStatus", "WebhookDelivery", "WebhookEndpoint", "WebhookEvent"]


class WebhookEvent(models.TextChoices):
    """The events a webhook is sent for; the names of the run events they follow."""

    RUN_COMPLETED = "run.completed", _("run completed")
    RUN_FAILED = "run.failed", _("run failed")
    RUN_REQUIRES_ACTION = "run.requires_action", _("run requires action")
    RUN_CANCELLED = "run.cancelled", _("run cancelled")


class DeliveryStatus(models.TextChoices):
    """Where a delivery stands: still to be tried, answered with a 2xx, or given up."""

    PENDING = "pending", _("pending")
    DELIVERED = "delivered", _("delivered")
    FAILED = "failed", _("failed")


class WebhookEndpoint(models.Model):
    """A URL that receives the events of its owner's runs, signed with its secret.

    ``events`` empty: every event. The secret signs messages and is never
    shown again (the admin and the API say only that one is set).
    """

    id = models.UUIDField(_("ID"), primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="llm_webhook_endpoints",
        verbose_name=_("owner"),
    )
    url = models.URLField(_("URL"), max_length=2000)
    secret = models.CharField(_("signing secret"), max_length=200)
    events = models.JSONField(_("events"), default=list, blank=True)
    is_active = models.BooleanField(_("active"), default=True)
    description = models.CharField(_("description"), max_length=200, blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("webhook endpoint")
        verbose_name_plural = _("webhook endpoints")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "is_active"], name="llmconv_hook_owner")]

    def __str__(self) -> str:
        return self.description or self.url

    def wants(self, event: str) -> bool:
        """Whether this endpoint receives ``event``."""
        return self.is_active and self.receives(self.events, event)

    @staticmethod
    def receives(events: list[str], event: str) -> bool:
        """Whether an active endpoint subscribed to ``events`` (none: all) receives ``event``."""
        return not events or event in events


class WebhookDelivery(models.Model):
    """One event for one endpoint: what is sent, and how sending went.

    ``id`` is the message's ``webhook-id``, the same on every attempt.
    ``endpoint_name`` names a ``WEBHOOKS`` entry; otherwise ``endpoint`` is
    the owner's row. ``next_attempt_at`` is when a pending delivery is due
    (pushed ahead while an attempt is in flight, so no other worker sends it too).
    """

    id = models.UUIDField(_("ID"), primary_key=True, default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(
        WebhookEndpoint,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="deliveries",
        verbose_name=_("endpoint"),
    )
    endpoint_name = models.CharField(_("endpoint setting"), max_length=100, blank=True)
    event = models.CharField(_("event"), max_length=40, choices=WebhookEvent)
    run_id = models.UUIDField(_("run"), null=True, blank=True, db_index=True)
    payload = models.JSONField(_("payload"))
    status = models.CharField(
        _("status"), max_length=10, choices=DeliveryStatus, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    response_status = models.PositiveIntegerField(_("response code"), null=True, blank=True)
    last_error = models.CharField(_("last error"), max_length=500, blank=True)
    next_attempt_at = models.DateTimeField(_("next attempt at"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)

    class Meta:
        verbose_name = _("webhook delivery")
        verbose_name_plural = _("webhook deliveries")
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="llmconv_hook_due"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(endpoint__isnull=False) | ~Q(endpoint_name=""),
                name="llmconv_delivery_endpoint",
                violation_error_code="missing_endpoint",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} → {self.endpoint_name or self.endpoint_id}"

    @property
    def message_id(self) -> str:
        """The ``webhook-id`` header: ``msg_`` and the id's hex."""
        return f"msg_{self.id.hex}"
