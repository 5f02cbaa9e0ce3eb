"""Read-only admins for the stored history: messages and runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from llm_conversations.admin.conversations import status_badge
from llm_conversations.admin.transcript import pretty_json
from llm_conversations.models import Message, Run

__all__ = ["HistoryAdmin", "MessageAdmin", "RunAdmin"]


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic for type checkers only
    _ModelAdmin = admin.ModelAdmin


def _pre(value: Any) -> SafeString | str:
    return format_html("<pre>{}</pre>", pretty_json(value)) if value else "-"


class HistoryAdmin(_ModelAdmin):
    """Read-only: rows can be viewed, never added, edited or deleted one by one.

    Rewriting or removing one turn breaks the pairing of calls and results
    and the gap-free positions. Delete permission itself is left to the
    permission system, because deleting a conversation cascades to its rows
    and the admin asks for delete permission on each of them.
    """

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> dict[str, Any]:
        # Django 6.1 passes action_location; 5.2 does not know it.
        if action_location is None:
            actions = super().get_actions(request)
        else:
            actions = super().get_actions(request, action_location=action_location)  # type: ignore[call-arg]
        actions.pop("delete_selected", None)
        return actions

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        raise PermissionDenied

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        return super().change_view(
            request, object_id, form_url, {**(extra_context or {}), "show_delete": False}
        )


class MessageAdmin(HistoryAdmin):
    """Stored turns, read-only."""

    list_display = ("position", "conversation", "role", "summary", "is_error", "created_at")
    list_filter = ("role", "is_error", ("created_at", admin.DateFieldListFilter))
    list_select_related = ("conversation",)
    # tool_calls is matched as JSON text, which finds tool names.
    search_fields = ("content", "tool_call_id", "tool_calls")
    ordering = ("conversation", "position")
    fields = (
        "conversation",
        "position",
        "role",
        "content",
        "tool_calls_pretty",
        "tool_call_id",
        "is_error",
        "run",
        "provider",
        "model",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cached_tokens",
        "metadata_pretty",
        "created_at",
    )
    readonly_fields = ("tool_calls_pretty", "metadata_pretty")

    @admin.display(description=_("Content"))
    def summary(self, obj: Message) -> str:
        if obj.tool_calls:
            names = (call.get("function", {}).get("name", "?") for call in obj.tool_calls)
            return "calls: " + ", ".join(names)
        return Truncator(obj.content).chars(80)

    @admin.display(description=_("Tool calls"))
    def tool_calls_pretty(self, obj: Message) -> SafeString | str:
        return _pre(obj.tool_calls)

    @admin.display(description=_("Metadata"))
    def metadata_pretty(self, obj: Message) -> SafeString | str:
        return _pre(obj.metadata)


class RunAdmin(HistoryAdmin):
    """Runs of the tool loop, read-only, filterable by status."""

    list_display = (
        "__str__",
        "conversation",
        "status_label",
        "termination_reason",
        "iterations",
        "total_tokens",
        "provider",
        "model",
        "created_at",
    )
    list_filter = (
        "status",
        "termination_reason",
        "provider",
        ("created_at", admin.DateFieldListFilter),
    )
    list_select_related = ("conversation",)
    search_fields = ("conversation__title", "error_type", "error_message", "model")
    fields = (
        "conversation_link",
        "status",
        "termination_reason",
        "provider",
        "model",
        "iterations",
        "max_iterations",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cached_tokens",
        "error_type",
        "error_message",
        "pending_pretty",
        "decisions_pretty",
        "tools_pretty",
        "created_at",
        "started_at",
        "finished_at",
    )
    readonly_fields = (
        "conversation_link",
        "pending_pretty",
        "decisions_pretty",
        "tools_pretty",
    )

    @admin.display(description=_("Status"), ordering="status")
    def status_label(self, obj: Run) -> SafeString:
        return status_badge(obj.status)

    @admin.display(description=_("Conversation"))
    def conversation_link(self, obj: Run) -> SafeString:
        opts = obj.conversation._meta
        url = reverse(
            f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.conversation_id]
        )
        return format_html('<a href="{}">{}</a>', url, obj.conversation)

    @admin.display(description=_("Pending tool calls"))
    def pending_pretty(self, obj: Run) -> SafeString | str:
        return _pre(obj.pending_tool_calls)

    @admin.display(description=_("Decisions"))
    def decisions_pretty(self, obj: Run) -> SafeString | str:
        return _pre(obj.decisions)

    @admin.display(description=_("Tools offered"))
    def tools_pretty(self, obj: Run) -> SafeString | str:
        return _pre(obj.tools)
