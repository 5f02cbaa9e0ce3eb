"""The decision trail in the admin: every decision on a call, read-only."""

from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from llm_conversations.admin.read_only import ReadOnlyAdmin
from llm_conversations.models import ToolDecision

__all__ = ["ToolDecisionAdmin"]


class ToolDecisionAdmin(ReadOnlyAdmin):
    """Who approved or denied which call, when and why; filterable, never editable."""

    list_display = (
        "decided_at",
        "tool_name",
        "decision",
        "decided_by",
        "by_rule",
        "run",
        "short_reason",
    )
    list_filter = ("decision", "by_rule", ("decided_at", admin.DateFieldListFilter))
    list_select_related = ("run", "decided_by")
    search_fields = ("tool_name", "call_id", "reason", "decided_by__username")
    raw_id_fields = ("run", "decided_by")
    fields = (
        "run",
        "call_id",
        "tool_name",
        "arguments",
        "decision",
        "decided_by",
        "by_rule",
        "reason",
        "digest",
        "decided_at",
    )
    readonly_fields = fields

    @admin.display(description=_("reason"))
    def short_reason(self, obj: ToolDecision) -> str:
        return obj.reason[:80]
