"""``ConversationAdmin``: the changelist and the chat-like change page."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import smart_split
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from llm_conversations.admin.filters import (
    FeedbackFilter,
    HasToolCallsFilter,
    LifecycleFilter,
    RoleFilter,
    RunStateFilter,
    ToolErrorFilter,
)
from llm_conversations.admin.transcript import shown_attachments, summarise_runs, transcript
from llm_conversations.admin.usage import usage_view
from llm_conversations.conversations.costs import with_cost
from llm_conversations.conversations.lifecycle import (
    archive_conversation,
    restore_conversation,
    trash_conversation,
    unarchive_conversation,
)
from llm_conversations.conversations.search import unquote_term
from llm_conversations.core.model_info import cost_shown
from llm_conversations.exceptions import LLMConversationsError
from llm_conversations.models import (
    Attachment,
    Conversation,
    Feedback,
    Message,
    Run,
    RunStatus,
    TitleSource,
)

__all__ = ["ConversationAdmin", "status_badge"]


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Conversation]
else:  # ModelAdmin is generic for type checkers only
    _ModelAdmin = admin.ModelAdmin


def status_badge(status: str) -> SafeString:
    """A run status as a coloured label (failed and paused runs stand out)."""
    label = RunStatus(status).label if status in RunStatus.values else status
    return format_html('<span class="llmconv-status llmconv-status-{}">{}</span>', status, label)


class ConversationAdmin(_ModelAdmin):
    """Conversations with a chat-like transcript and a timeline of their runs.

    A base class for host projects: unregister ``Conversation`` and register
    a subclass to add columns, filters or actions (see ``docs/admin.md``).
    The change page renders ``change_form_template``, which includes
    ``llm_conversations/admin/runs.html`` and ``.../transcript.html``.
    """

    change_form_template = "llm_conversations/admin/conversation/change_form.html"
    change_list_template = "llm_conversations/admin/conversation/change_list.html"
    list_display = (
        "__str__",
        "owner",
        "message_count",
        "run_count",
        "cost",
        "last_run",
        "state",
        "created_at",
        "updated_at",
    )
    list_select_related = ("owner",)
    actions = ("archive", "unarchive", "trash", "restore")
    list_filter = (
        LifecycleFilter,
        RunStateFilter,
        RoleFilter,
        HasToolCallsFilter,
        ToolErrorFilter,
        FeedbackFilter,
        "title_source",
        ("forked_from", admin.EmptyFieldListFilter),
        ("created_at", admin.DateFieldListFilter),
        ("updated_at", admin.DateFieldListFilter),
    )
    # Title and owner here; message content and tool calls in get_search_results.
    search_fields = ("title", f"owner__{get_user_model().USERNAME_FIELD}")
    search_help_text = _("Title, owner, message text or tool name.")
    # The owner is an autocomplete when the user admin supports it, else a raw id.
    raw_id_fields = ("owner",)
    date_hierarchy = "created_at"
    readonly_fields = (
        "id",
        "title_source",
        "message_count",
        "lineage",
        "fork_list",
        "archived_at",
        "trashed_at",
        "created_at",
        "updated_at",
    )
    fields = (
        "id",
        "title",
        "title_source",
        "owner",
        "metadata",
        "message_count",
        "lineage",
        "fork_list",
        "archived_at",
        "trashed_at",
        "created_at",
        "updated_at",
    )
    # The change page shows the latest messages and runs up to these numbers.
    transcript_limit = 1000
    runs_limit = 100
    # Whether search also matches message content and tool calls.
    search_messages = True
    # The change page links this many forks, then the changelist of all of them.
    forks_limit = 20

    class Media:
        css = {"all": ["llm_conversations/admin.css"]}

    # Usage page --------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        """The admin's URLs, with ``usage/`` (spend and tokens per day) first."""
        opts = self.model._meta
        usage = path(
            "usage/",
            self.admin_site.admin_view(self.usage_view),
            name=f"{opts.app_label}_{opts.model_name}_usage",
        )
        return [usage, *super().get_urls()]

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        """Spend and tokens per day for the last 30 days, by model and by user
        (``admin/usage.py``)."""
        return usage_view(self, request)

    # Changelist ------------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        """Conversations with their run count, cost and latest run status.

        Subqueries rather than a join and ``GROUP BY``, so the queryset stays
        deletable and the count query stays cheap.
        """
        runs = Run.objects.filter(conversation=OuterRef("pk"))
        return with_cost(
            super()
            .get_queryset(request)
            .annotate(
                run_count=Coalesce(
                    Subquery(
                        runs.order_by().values("conversation").annotate(n=Count("pk")).values("n"),
                        output_field=IntegerField(),
                    ),
                    0,
                ),
                last_run_status=Subquery(runs.order_by("-created_at").values("status")[:1]),
            )
        )

    @admin.display(description=_("Runs"), ordering="run_count")
    def run_count(self, obj: Conversation) -> int:
        return int(getattr(obj, "run_count", 0))

    @admin.display(description=_("Cost (USD)"), ordering="cost")
    def cost(self, obj: Conversation) -> str:
        return cost_shown(getattr(obj, "cost", Decimal(0)))

    @admin.display(description=_("Last run"), ordering="last_run_status")
    def last_run(self, obj: Conversation) -> SafeString | str:
        status = getattr(obj, "last_run_status", None)
        return status_badge(status) if status else "-"

    def get_autocomplete_fields(self, request: HttpRequest) -> tuple[str, ...]:
        """Add ``owner`` when the user model's admin is registered and searchable.

        A host project without a user admin gets a raw id field instead of
        the system check error a static ``autocomplete_fields`` would raise.
        """
        fields = tuple(super().get_autocomplete_fields(request))
        user_model = get_user_model()
        if (
            "owner" not in fields
            and self.admin_site.is_registered(user_model)
            and self.admin_site.get_model_admin(user_model).get_search_fields(request)
        ):
            fields += ("owner",)
        return fields

    def message_search(self, term: str) -> Exists:
        """Conversations with a message whose text or tool calls contain ``term``.

        ``tool_calls__icontains`` matches the stored JSON text, so a tool name
        (and argument text) is found on SQLite and PostgreSQL alike.
        """
        return Exists(
            Message.objects.filter(conversation=OuterRef("pk")).filter(
                Q(content__icontains=term) | Q(tool_calls__icontains=term)
            )
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Conversation], search_term: str
    ) -> tuple[QuerySet[Conversation], bool]:
        """Each word must match the ``search_fields`` or a message of the conversation."""
        if not self.search_messages:
            return super().get_search_results(request, queryset, search_term)
        has_fields = bool(self.get_search_fields(request))
        for bit in smart_split(search_term):
            term = unquote_term(bit)
            if not term:
                continue
            match: Q | Exists = self.message_search(term)
            if has_fields:
                # The admin's own search for this word, as a subquery of ids.
                by_fields, _ = super().get_search_results(
                    request, self.model._default_manager.all(), bit
                )
                match = Q(pk__in=by_fields.values("pk")) | Q(match)
            queryset = queryset.filter(match)
        # EXISTS and IN subqueries never duplicate rows.
        return queryset, False

    # Change page -----------------------------------------------------------

    def _change_link(self, conversation: Conversation) -> SafeString:
        opts = Conversation._meta
        url = reverse(
            f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_change",
            args=[conversation.pk],
        )
        return format_html('<a href="{}">{}</a>', url, conversation)

    @admin.display(description=_("Forked from"))
    def lineage(self, obj: Conversation) -> SafeString | str:
        """The conversation this one copies the start of, linked (a query for a fork)."""
        if obj.forked_at_position is None:
            return "-"
        source: SafeString | str = (
            self._change_link(obj.forked_from)
            if obj.forked_from is not None
            else gettext("a deleted conversation")
        )
        return format_html(gettext("{}, its first {} messages"), source, obj.forked_at_position)

    @admin.display(description=_("Forks"))
    def fork_list(self, obj: Conversation) -> SafeString | str:
        """The newest forks of this conversation, linked; one query."""
        if obj.pk is None:
            return "-"
        forks = list(obj.forks.order_by("-created_at")[: self.forks_limit + 1])
        if not forks:
            return "-"
        links = [self._change_link(fork) for fork in forks[: self.forks_limit]]
        if len(forks) > self.forks_limit:
            opts = Conversation._meta
            url = reverse(f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_changelist")
            links.append(
                format_html(
                    '<a href="{}?forked_from__exact={}">{}</a>', url, obj.pk, gettext("all")
                )
            )
        return format_html_join(", ", "{}", ((link,) for link in links))

    @admin.display(description=_("state"))
    def state(self, obj: Conversation) -> str:
        """In the trash, archived, or nothing (in the list)."""
        if obj.trashed_at is not None:
            return gettext("in the trash")
        return gettext("archived") if obj.archived_at is not None else ""

    # Actions -------------------------------------------------------------------

    def _each(
        self,
        request: HttpRequest,
        queryset: QuerySet[Conversation],
        change: Callable[[Conversation], object],
        done: str,
    ) -> None:
        """Apply ``change`` to each selected conversation; report how many it
        changed and each it refused (a run active, or in the trash)."""
        changed = 0
        for conversation in queryset:
            try:
                change(conversation)
            except LLMConversationsError as exc:
                self.message_user(request, f"{conversation}: {exc.message}", level="warning")
            else:
                changed += 1
        self.message_user(request, done % {"count": changed})

    @admin.action(description=_("Archive selected conversations"))
    def archive(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        self._each(request, queryset, archive_conversation, gettext("%(count)d archived."))

    @admin.action(description=_("Unarchive selected conversations"))
    def unarchive(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        self._each(request, queryset, unarchive_conversation, gettext("%(count)d unarchived."))

    @admin.action(description=_("Move selected conversations to the trash"))
    def trash(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        self._each(request, queryset, trash_conversation, gettext("%(count)d moved to the trash."))

    @admin.action(description=_("Restore selected conversations from the trash"))
    def restore(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        self._each(request, queryset, restore_conversation, gettext("%(count)d restored."))

    def save_model(self, request: HttpRequest, obj: Conversation, form: Any, change: bool) -> None:
        """A title changed here is a person's: automatic titles never replace it."""
        if "title" in form.changed_data:
            obj.title_source = TitleSource.USER
        super().save_model(request, obj, form, change)

    def transcript_context(self, request: HttpRequest, obj: Conversation) -> dict[str, Any]:
        """Template context for the transcript and the run timeline: three queries
        (messages, their feedback with its users, runs)."""
        rows = list(
            Message.objects.filter(conversation=obj).order_by("-position")[: self.transcript_limit]
        )
        rows.reverse()
        feedback = (
            list(
                Feedback.objects.filter(
                    message__conversation=obj, message__position__gte=rows[0].position
                )
                .select_related("user")
                .order_by("created_at")
            )
            if rows
            else []
        )
        run_rows = list(
            Run.objects.filter(conversation=obj).order_by("-created_at")[: self.runs_limit]
        )
        total_runs = int(getattr(obj, "run_count", len(run_rows)))
        runs = summarise_runs(run_rows)
        site = self.admin_site
        for summary in runs:
            # Number runs as they happened, even when older ones are not shown.
            summary.number += total_runs - len(run_rows)
            if site.is_registered(Run):
                summary.url = reverse(
                    f"{site.name}:{Run._meta.app_label}_run_change", args=[summary.run.pk]
                )
        opts = Message._meta
        # Images and files of the messages shown: one query, none without parts.
        shown = shown_attachments(rows, site.name) if site.is_registered(Attachment) else {}
        return {
            "entries": transcript(rows, runs, feedback, shown),
            "runs": runs,
            "hidden_messages": max(0, obj.message_count - len(rows)),
            "hidden_runs": max(0, total_runs - len(run_rows)),
            "messages_url": (
                reverse(f"{site.name}:{opts.app_label}_{opts.model_name}_changelist")
                + f"?conversation__exact={obj.pk}"
                if site.is_registered(Message)
                else ""
            ),
        }

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Conversation | None = None,
    ) -> HttpResponse:
        """Add the transcript to the context of an existing conversation's page."""
        if obj is not None and not add:
            context.update(self.transcript_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)
