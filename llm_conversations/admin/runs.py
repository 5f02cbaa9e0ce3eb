"""The read-only admin of runs.

Rows are never edited one by one; the run changelist has two actions that go
through the tool loop's own operations: cancel active runs, requeue failed ones.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from llm_conversations.admin.conversations import status_badge
from llm_conversations.admin.read_only import ReadOnlyAdmin, json_block
from llm_conversations.admin.transcript import pretty_json
from llm_conversations.exceptions import LLMConversationsError
from llm_conversations.models import ACTIVE_RUN_STATUSES, Run, RunEvent, RunStatus

__all__ = ["RunAdmin", "tool_list"]


# A tool's description on the run page, before its schema is opened.
TOOL_DESCRIPTION_CHARS = 120


def tool_list(tools: Any) -> SafeString | str:
    """The tools a run offered as names with a short description, each schema folded
    in a ``<details>``: a run offered dozens, and their schemas are long."""
    if not tools:
        return "-"
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        return json_block(tools)  # not the stored form: shown as it is
    items = format_html_join(
        "",
        "<li><details><summary><code>{}</code> {}</summary><pre>{}</pre></details></li>",
        (
            (
                tool.get("name", "?"),
                Truncator(str(tool.get("description") or "")).chars(TOOL_DESCRIPTION_CHARS),
                pretty_json(tool.get("parameters", {})),
            )
            for tool in tools
        ),
    )
    count = ngettext("%(n)d tool", "%(n)d tools", len(tools)) % {"n": len(tools)}
    return format_html('<p class="help">{}</p><ul class="llmconv-tools">{}</ul>', count, items)


class RunAdmin(ReadOnlyAdmin):
    """Runs of the tool loop, read-only, filterable by status.

    The change page shows who executes the run (attempts, lease owner and
    expiry) and its latest ``events_limit`` events, oldest first, in one query.
    Two changelist actions, for users with the change permission on runs:
    cancel selected active or waiting runs, requeue selected failed runs for a
    worker. A run waiting behind a conversation's active run (busy strategy
    ``enqueue``) names the run ahead of it; a run that interrupted another names
    that one (``termination_reason`` ``interrupted`` or ``rolled_back``).
    """

    list_display = (
        "__str__",
        "conversation",
        "status_label",
        "waiting_for",
        "termination_reason",
        "iterations",
        "attempts",
        "total_tokens",
        "cost_usd",
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
    search_fields = ("conversation__title", "error_type", "error_message", "model", "lease_owner")
    actions = ("cancel_runs", "requeue_runs")
    fields = (
        "conversation_link",
        "status",
        "termination_reason",
        "provider",
        "answered_by",
        "fallbacks",
        "model",
        "iterations",
        "max_iterations",
        "attempts",
        "lease_owner",
        "lease_expires_at",
        "enqueued_at",
        "waits_for_link",
        "replaced_link",
        "waiting_turn_pretty",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
        "cost_usd",
        "context_strategy",
        "context_first_position",
        "context_estimated_tokens",
        "context_reported_tokens",
        "error_type",
        "error_message",
        "waiting_pretty",
        "decisions_pretty",
        "tools_pretty",
        "created_at",
        "started_at",
        "finished_at",
        "events_table",
    )
    readonly_fields = (
        "cost_usd",
        "conversation_link",
        "waits_for_link",
        "replaced_link",
        "waiting_turn_pretty",
        "waiting_pretty",
        "decisions_pretty",
        "tools_pretty",
        "events_table",
    )
    # The change page shows the latest events of a run up to this number.
    events_limit = 200

    class Media:
        css = {"all": ["llm_conversations/admin.css"]}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        # The change page links the conversation: loaded with the run.
        return super().get_queryset(request).select_related("conversation")

    @admin.display(description=_("Status"), ordering="status")
    def status_label(self, obj: Run) -> SafeString:
        return status_badge(obj.status)

    @admin.display(description=_("Waiting for"))
    def waiting_for(self, obj: Run) -> str:
        """The calls a paused run waits on, by tool: a person's approval or a client's output
        (filter by status "requires action" for every call waiting across conversations);
        for a run waiting behind another, that run."""
        if obj.status == RunStatus.WAITING and obj.waits_for_id:
            return _("run %(run)s") % {"run": obj.waits_for_id}
        return ", ".join(f"{p.call.name} ({p.reason.label})" for p in obj.waiting_calls)

    def _run_link(self, run_id: Any) -> SafeString | str:
        if run_id is None:
            return "-"
        opts = self.opts
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[run_id])
        return format_html('<a href="{}">{}</a>', url, run_id)

    @admin.display(description=_("Waits for"))
    def waits_for_link(self, obj: Run) -> SafeString | str:
        """The run this one waited behind (busy strategy ``enqueue``)."""
        return self._run_link(obj.waits_for_id)

    @admin.display(description=_("Interrupted run"))
    def replaced_link(self, obj: Run) -> SafeString | str:
        """The run this one interrupted (busy strategies ``interrupt`` and ``rollback``)."""
        return self._run_link(obj.replaced_id)

    @admin.display(description=_("Waiting user turn"))
    def waiting_turn_pretty(self, obj: Run) -> SafeString | str:
        return json_block(obj.waiting_turn) if obj.waiting_turn else "-"

    @admin.display(description=_("Conversation"))
    def conversation_link(self, obj: Run) -> SafeString:
        opts = obj.conversation._meta
        url = reverse(
            f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.conversation_id]
        )
        return format_html('<a href="{}">{}</a>', url, obj.conversation)

    @admin.display(description=_("Waiting calls"))
    def waiting_pretty(self, obj: Run) -> SafeString | str:
        return json_block([waiting.to_stored() for waiting in obj.waiting_calls])

    @admin.display(description=_("Decisions"))
    def decisions_pretty(self, obj: Run) -> SafeString | str:
        return json_block(obj.decisions)

    @admin.display(description=_("Tools offered"))
    def tools_pretty(self, obj: Run) -> SafeString | str:
        return tool_list(obj.tools)

    @admin.display(description=_("Events"))
    def events_table(self, obj: Run) -> SafeString | str:
        """The latest ``events_limit`` events, oldest first: one query."""
        rows = list(
            RunEvent.objects.filter(run=obj)
            .order_by("-id")
            .values_list("id", "created_at", "type", "data")[: self.events_limit + 1]
        )
        if not rows:
            return "-"
        more = len(rows) > self.events_limit
        rows = rows[: self.events_limit]
        rows.reverse()
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td><pre>{}</pre></td></tr>",
            (
                (event_id, created.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3], kind, _event_data(data))
                for event_id, created, kind, data in rows
            ),
        )
        note = (
            format_html(
                '<p class="help">{}</p>',
                _("Only the latest %(n)d events are shown.") % {"n": self.events_limit},
            )
            if more
            else ""
        )
        return format_html(
            '{}<table class="llmconv-events"><thead><tr><th>#</th><th>{}</th><th>{}</th>'
            "<th>{}</th></tr></thead><tbody>{}</tbody></table>",
            note,
            _("Time"),
            _("Type"),
            _("Data"),
            body,
        )

    # Actions ----------------------------------------------------------------

    def has_manage_permission(self, request: HttpRequest) -> bool:
        """The change permission on runs as the permission system grants it.

        Rows stay read-only (``has_change_permission`` is False); cancelling and
        requeueing are operations of the loop, allowed to whoever may change runs.
        """
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    @admin.action(description=_("Cancel selected active runs"), permissions=["manage"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        from llm_conversations.runs import ToolLoopService

        service = ToolLoopService()
        cancellable = [*ACTIVE_RUN_STATUSES, RunStatus.WAITING]
        inactive = queryset.exclude(status__in=cancellable).count()
        done, skipped = self._each(queryset.filter(status__in=cancellable), service.cancel)
        skipped += inactive
        self._report(
            request,
            ngettext("Cancelled %(n)d run.", "Cancelled %(n)d runs.", done) % {"n": done},
            skipped,
            _("not active"),
        )

    @admin.action(
        description=_("Requeue selected failed runs for a worker"), permissions=["manage"]
    )
    def requeue_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        from llm_conversations.runs import ToolLoopService

        service = ToolLoopService()
        not_failed = queryset.exclude(status=RunStatus.FAILED).count()
        done, skipped = self._each(
            queryset.filter(status=RunStatus.FAILED),
            lambda pk: service.retry(pk, background=True),
        )
        skipped += not_failed
        self._report(
            request,
            ngettext("Requeued %(n)d run.", "Requeued %(n)d runs.", done) % {"n": done},
            skipped,
            _("not failed, or their conversation has another active run"),
        )

    @staticmethod
    def _each(queryset: QuerySet[Run], operation: Any) -> tuple[int, int]:
        """Apply ``operation`` to each run id; (done, refused by the loop's rules)."""
        done = skipped = 0
        for pk in queryset.values_list("pk", flat=True):
            try:
                operation(pk)
            except LLMConversationsError:
                skipped += 1  # it changed meanwhile, or the rules refuse it
            else:
                done += 1
        return done, skipped

    def _report(self, request: HttpRequest, message: str, skipped: int, why: Any) -> None:
        if skipped:
            message += " " + ngettext(
                "%(n)d run was left alone: %(why)s.",
                "%(n)d runs were left alone: %(why)s.",
                skipped,
            ) % {"n": skipped, "why": why}
        self.message_user(request, message, messages.SUCCESS if not skipped else messages.WARNING)


def _event_data(data: Any) -> str:
    """An event's data for people: text as it is, anything else as compact JSON."""
    if isinstance(data, dict) and set(data) == {"delta"} and isinstance(data["delta"], str):
        return data["delta"]
    return pretty_json(data) if data else ""
