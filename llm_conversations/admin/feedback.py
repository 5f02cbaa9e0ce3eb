"""``FeedbackAdmin``: users' ratings of assistant turns, read-only."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from llm_conversations.admin.read_only import ReadOnlyAdmin
from llm_conversations.models import Feedback

__all__ = ["FeedbackAdmin"]


class FeedbackAdmin(ReadOnlyAdmin):
    """Users' ratings of assistant turns, read-only, filterable by rating and date.

    Each row links the rated message's conversation, whose transcript shows the
    rating under the answer.
    """

    list_display = ("rating_label", "comment_summary", "user", "conversation_link", "updated_at")
    list_filter = ("rating", ("updated_at", admin.DateFieldListFilter))
    list_select_related = ("user", "message__conversation")
    search_fields = ("comment", "message__content", "message__conversation__title")
    date_hierarchy = "updated_at"
    fields = (
        "rating",
        "comment",
        "user",
        "conversation_link",
        "message_content",
        "created_at",
        "updated_at",
    )
    readonly_fields = ("conversation_link", "message_content")

    class Media:
        css = {"all": ["llm_conversations/admin.css"]}

    @admin.display(description=_("Rating"), ordering="rating")
    def rating_label(self, obj: Feedback) -> SafeString:
        kind = "up" if obj.rating > 0 else "down"
        return format_html(
            '<strong class="llmconv-rating-{}">{}</strong>', kind, obj.get_rating_display()
        )

    @admin.display(description=_("Comment"))
    def comment_summary(self, obj: Feedback) -> str:
        return Truncator(obj.comment).chars(80) or "-"

    @admin.display(description=_("Conversation"))
    def conversation_link(self, obj: Feedback) -> SafeString:
        conversation = obj.message.conversation
        opts = conversation._meta
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[conversation.pk])
        return format_html(
            '<a href="{}#message-{}">{}</a> #{}',
            url,
            obj.message.position,
            conversation,
            obj.message.position,
        )

    @admin.display(description=_("Rated message"))
    def message_content(self, obj: Feedback) -> str:
        return obj.message.content

    def get_queryset(self, request: HttpRequest) -> QuerySet[Feedback]:
        # The change page shows the message and links its conversation.
        return super().get_queryset(request).select_related("user", "message__conversation")
