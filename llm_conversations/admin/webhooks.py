"""``WebhookEndpointAdmin`` and ``WebhookDeliveryAdmin``: owners' endpoints and every
message sent, read-only. A signing secret is never shown, only whether one is set."""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from llm_conversations.admin.read_only import ReadOnlyAdmin
from llm_conversations.models import WebhookDelivery, WebhookEndpoint

__all__ = ["WebhookDeliveryAdmin", "WebhookEndpointAdmin"]


class WebhookEndpointAdmin(ReadOnlyAdmin):
    """Owners' webhook endpoints: URL, events, whether active; the secret as "set" only."""

    list_display = ("url", "owner", "events_label", "is_active", "secret_set", "created_at")
    list_filter = ("is_active",)
    list_select_related = ("owner",)
    search_fields = ("url", "description", "owner__username")
    # Listed, never "__all__": the secret column stays out of every form and page.
    fields = (
        "owner",
        "url",
        "description",
        "events_label",
        "is_active",
        "secret_set",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    @admin.display(description=_("Events"))
    def events_label(self, obj: WebhookEndpoint) -> str:
        return ", ".join(obj.events) or str(_("all"))

    @admin.display(description=_("Signing secret"), boolean=True)
    def secret_set(self, obj: WebhookEndpoint) -> bool:
        return bool(obj.secret)


class WebhookDeliveryAdmin(ReadOnlyAdmin):
    """Each event sent to each endpoint, with its attempts and last outcome."""

    list_display = (
        "event",
        "endpoint_label",
        "status",
        "attempts",
        "response_status",
        "last_error",
        "next_attempt_at",
        "created_at",
    )
    list_filter = ("status", "event", ("created_at", admin.DateFieldListFilter))
    list_select_related = ("endpoint",)
    search_fields = ("=run_id", "endpoint_name", "endpoint__url")
    date_hierarchy = "created_at"
    fields = (
        "event",
        "endpoint_label",
        "run_id",
        "status",
        "attempts",
        "response_status",
        "last_error",
        "next_attempt_at",
        "created_at",
        "finished_at",
        "payload_pretty",
    )
    readonly_fields = fields

    @admin.display(description=_("Endpoint"))
    def endpoint_label(self, obj: WebhookDelivery) -> str:
        if obj.endpoint_name:
            return f"WEBHOOKS[{obj.endpoint_name!r}]"
        return obj.endpoint.url if obj.endpoint is not None else "-"

    @admin.display(description=_("Payload"))
    def payload_pretty(self, obj: WebhookDelivery) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(obj.payload, indent=2, ensure_ascii=False))
