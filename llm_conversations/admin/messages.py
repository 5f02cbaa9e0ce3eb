"""The read-only admin of stored turns."""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from llm_conversations.admin.read_only import ReadOnlyAdmin, json_block
from llm_conversations.models import Message

__all__ = ["MessageAdmin"]


class MessageAdmin(ReadOnlyAdmin):
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
        "cache_write_tokens",
        "reasoning_tokens",
        "cost_usd",
        "metadata_pretty",
        "created_at",
    )
    readonly_fields = ("tool_calls_pretty", "metadata_pretty", "cost_usd")

    @admin.display(description=_("Content"))
    def summary(self, obj: Message) -> str:
        if obj.tool_calls:
            names = (call.get("function", {}).get("name", "?") for call in obj.tool_calls)
            return "calls: " + ", ".join(names)
        return Truncator(obj.content).chars(80)

    @admin.display(description=_("Tool calls"))
    def tool_calls_pretty(self, obj: Message) -> SafeString | str:
        return json_block(obj.tool_calls)

    @admin.display(description=_("Metadata"))
    def metadata_pretty(self, obj: Message) -> SafeString | str:
        return json_block(obj.metadata)
