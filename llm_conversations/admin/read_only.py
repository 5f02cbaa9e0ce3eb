"""The base of the app's read-only admins: rows are viewed, never added, edited or
deleted one by one; and how their pages show stored JSON (:func:`json_block`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from llm_conversations.admin.transcript import pretty_json
from llm_conversations.core.model_info import cost_shown
from llm_conversations.models import Message, Run

__all__ = ["ReadOnlyAdmin", "json_block"]


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic for type checkers only
    _ModelAdmin = admin.ModelAdmin


def json_block(value: Any) -> SafeString | str:
    """A stored JSON value shown on a change page: indented in a ``<pre>``, ``-`` if empty."""
    return format_html("<pre>{}</pre>", pretty_json(value)) if value else "-"


class ReadOnlyAdmin(_ModelAdmin):
    """Read-only: rows can be viewed, never added, edited or deleted one by one.

    Rewriting or removing one turn breaks the pairing of calls and results
    and the gap-free positions. Delete permission itself is left to the
    permission system, because deleting a conversation cascades to its rows
    and the admin asks for delete permission on each of them.
    """

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description=_("Cost (USD)"), ordering="cost")
    def cost_usd(self, obj: Message | Run) -> str:
        """The row's cost as people read it (the exact value is in the API and the CSV)."""
        return cost_shown(obj.cost)

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
