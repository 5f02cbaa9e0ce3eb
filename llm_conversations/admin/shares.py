"""``ShareLinkAdmin``: every share link, read-only, with an action that revokes them.

The token is never known after a link is made; the page shows the start of its
hash only, enough to tell links apart."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from llm_conversations.admin.read_only import ReadOnlyAdmin
from llm_conversations.conversations.shares import revoke_shares
from llm_conversations.models import ShareLink

__all__ = ["ShareLinkAdmin"]

# Hex digits of the token hash shown (of 64).
HASH_SHOWN = 12


class ShareLinkAdmin(ReadOnlyAdmin):
    """Links to conversation snapshots: who made them, what they show, whether they work."""

    list_display = (
        "hash_start",
        "conversation",
        "created_by",
        "message_count",
        "is_active",
        "expires_at",
        "revoked_at",
        "created_at",
    )
    list_filter = (
        ("revoked_at", admin.EmptyFieldListFilter),
        ("expires_at", admin.EmptyFieldListFilter),
        ("created_at", admin.DateFieldListFilter),
    )
    list_select_related = ("conversation", "created_by")
    search_fields = ("conversation__title", "created_by__username", "=conversation__id")
    actions = ("revoke_links",)
    # Listed, never "__all__": the whole token hash stays out of every page.
    fields = (
        "hash_start",
        "conversation",
        "created_by",
        "up_to_position",
        "message_count",
        "is_active",
        "expires_at",
        "revoked_at",
        "created_at",
    )
    readonly_fields = fields

    @admin.display(description=_("Token hash"))
    def hash_start(self, obj: ShareLink) -> str:
        return f"{obj.token_hash[:HASH_SHOWN]}…"

    def get_queryset(self, request: HttpRequest) -> QuerySet[ShareLink]:
        """Every link, with how many messages it shows now (one subquery, not one per row)."""
        return ShareLink.objects.with_shown_count()

    @admin.display(description=_("Messages shown"), ordering="shown_count")
    def message_count(self, obj: ShareLink) -> int:
        return int(obj.shown_count)  # type: ignore[attr-defined]  # with_shown_count()

    @admin.display(description=_("Active"), boolean=True)
    def is_active(self, obj: ShareLink) -> bool:
        """Not revoked, not expired, its conversation not in the trash."""
        return obj.is_usable(timezone.now())

    def has_manage_permission(self, request: HttpRequest) -> bool:
        """The change permission on share links, as the permission system grants it
        (rows stay read-only; revoking is the link's own operation)."""
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    @admin.action(description=_("Revoke selected share links"), permissions=["manage"])
    def revoke_links(self, request: HttpRequest, queryset: QuerySet[ShareLink]) -> None:
        done = revoke_shares(queryset)
        message = ngettext("Revoked %(n)d link.", "Revoked %(n)d links.", done) % {"n": done}
        self.message_user(request, message, messages.SUCCESS)
