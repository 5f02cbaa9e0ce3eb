"""Webhook endpoints as their owner sends and sees them: the secret is write-only."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from llm_conversations.api.serializers.common import StrictTypes
from llm_conversations.core.webhook_signing import SECRET_PATTERN, secret_problem
from llm_conversations.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from llm_conversations.runs.webhooks.endpoints import events_problem
from llm_conversations.runs.webhooks.hosts import (
    UNRESOLVED,
    host_problem,
    url_host,
    url_problem,
)

__all__ = ["WebhookDeliverySerializer", "WebhookEndpointSerializer"]


# What the views check (url_problem, secret_problem), stated for the schema.
URL_PATTERN = r"^https?://[A-Za-z0-9\[]\S*$"


@extend_schema_field({"type": "string", "pattern": URL_PATTERN, "maxLength": 2000})
class WebhookUrlField(serializers.CharField):
    """An http or https URL with a host."""


@extend_schema_field({"type": "string", "pattern": SECRET_PATTERN, "writeOnly": True})
class SecretField(serializers.CharField):
    """A Standard Webhooks signing secret, accepted and never answered."""


@extend_schema_field(
    {"type": "array", "items": {"type": "string", "enum": list(WebhookEvent.values)}}
)
class EventsField(serializers.ListField):
    """Event names; an unknown one is ``invalid_events``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.CharField(allow_blank=True), **kwargs)


def _reach_problem(host: str) -> str | None:
    """Why no webhook could reach ``host`` now. A name that does not resolve yet
    is accepted: every attempt checks its addresses again before connecting."""
    problem = host_problem(host)
    return None if problem == UNRESOLVED else problem


class WebhookEndpointSerializer(
    StrictTypes[WebhookEndpoint], serializers.ModelSerializer[WebhookEndpoint]
):
    """One of the caller's endpoints. ``secret`` is accepted, never answered: the
    answer says only ``secret_set``."""

    url = WebhookUrlField(
        max_length=2000,
        help_text="An http or https URL whose host has public addresses only, "
        "or is in `WEBHOOK_ALLOWED_HOSTS`; `invalid_url` says why not.",
    )
    secret = SecretField(
        write_only=True,
        max_length=200,
        help_text="`whsec_` and the base64 of 24 to 62 random bytes; never shown again.",
    )
    events = EventsField(
        required=False,
        help_text=f"The events sent ({', '.join(WebhookEvent.values)}); empty or omitted: all.",
    )
    secret_set = serializers.SerializerMethodField()

    class Meta:
        model = WebhookEndpoint
        fields = (
            "id",
            "url",
            "secret",
            "secret_set",
            "events",
            "is_active",
            "description",
            "created_at",
            "updated_at",
        )
        read_only_fields = ("id", "created_at", "updated_at")

    def get_secret_set(self, obj: WebhookEndpoint) -> bool:
        return bool(obj.secret)

    def validate_url(self, value: str) -> str:
        problem = url_problem(value) or (None if re.match(URL_PATTERN, value) else "not a URL")
        if problem is None:
            problem = _reach_problem(url_host(value))
        if problem is not None:
            raise serializers.ValidationError(problem, code="invalid_url")
        return value

    def validate_secret(self, value: str) -> str:
        # The problem names the rule, never the value sent.
        problem = secret_problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem, code="invalid_secret")
        return value

    def validate_events(self, value: Any) -> list[str]:
        problem = events_problem(list(value))
        if problem is not None:
            raise serializers.ValidationError(problem, code="invalid_events")
        return list(dict.fromkeys(value))


class WebhookDeliverySerializer(serializers.ModelSerializer[WebhookDelivery]):
    """One message sent to an endpoint, and how sending it went."""

    class Meta:
        model = WebhookDelivery
        fields = (
            "id",
            "event",
            "run_id",
            "status",
            "attempts",
            "response_status",
            "last_error",
            "next_attempt_at",
            "created_at",
            "finished_at",
            "payload",
        )
        read_only_fields = fields
