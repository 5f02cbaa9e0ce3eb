"""Changelist filters for conversations: each asks what a conversation contains.

Every filter is an ``EXISTS`` subquery, so it never duplicates rows and
combines with the others and with search without joins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from llm_conversations.models import (
    ACTIVE_RUN_STATUSES,
    ROLE_CHOICES,
    Feedback,
    Message,
    Rating,
    Run,
    RunStatus,
    TerminationReason,
)

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise as StrOrPromise


def _has_message(**lookups: Any) -> Exists:
    return Exists(Message.objects.filter(conversation=OuterRef("pk"), **lookups))


def _has_run(condition: Q) -> Exists:
    return Exists(Run.objects.filter(condition, conversation=OuterRef("pk")))


class RoleFilter(admin.SimpleListFilter):
    """Conversations with at least one message of the chosen role."""

    title = _("has a message of role")
    parameter_name = "role"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, StrOrPromise]]:
        return list(ROLE_CHOICES)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        if self.value() in dict(ROLE_CHOICES):
            return queryset.filter(_has_message(role=self.value()))
        return None


class YesNoFilter(admin.SimpleListFilter):
    """A yes/no filter on one ``EXISTS`` condition (set ``condition`` in a subclass)."""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, StrOrPromise]]:
        return [("yes", _("Yes")), ("no", _("No"))]

    def condition(self) -> Exists:
        raise NotImplementedError

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        if self.value() == "yes":
            return queryset.filter(self.condition())
        if self.value() == "no":
            return queryset.filter(~self.condition())
        return None


class HasToolCallsFilter(YesNoFilter):
    """Conversations in which the model called a tool."""

    title = _("has tool calls")
    parameter_name = "tool_calls"

    def condition(self) -> Exists:
        return _has_message(tool_calls__isnull=False)


class ToolErrorFilter(YesNoFilter):
    """Conversations with a tool result marked as an error."""

    title = _("has tool errors")
    parameter_name = "tool_errors"

    def condition(self) -> Exists:
        return _has_message(role="tool", is_error=True)


class RelatedChoicesFilter(admin.SimpleListFilter):
    """One choice per condition on related rows; ``none``: no related row at all.

    A subclass sets ``CHOICES`` (key: label and condition) and ``related()``.
    """

    CHOICES: dict[str, tuple[StrOrPromise, Q]] = {}

    def related(self, condition: Q) -> Exists:
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, StrOrPromise]]:
        return [(key, label) for key, (label, _) in self.CHOICES.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        value = self.value()
        if value == "none":
            return queryset.filter(~self.related(Q()))
        if value in self.CHOICES:
            return queryset.filter(self.related(self.CHOICES[value][1]))
        return None


class RunStateFilter(RelatedChoicesFilter):
    """Conversations with a run in the chosen state (failed, paused, ...)."""

    title = _("runs")
    parameter_name = "run"
    CHOICES = {
        "failed": (_("with a failed run"), Q(status=RunStatus.FAILED)),
        "paused": (_("paused, waiting for action"), Q(status=RunStatus.REQUIRES_ACTION)),
        "active": (_("with an active run"), Q(status__in=ACTIVE_RUN_STATUSES)),
        "cancelled": (_("with a cancelled run"), Q(status=RunStatus.CANCELLED)),
        "max_iterations": (
            _("stopped at the iteration limit"),
            Q(termination_reason=TerminationReason.MAX_ITERATIONS),
        ),
        "none": (_("without runs"), Q()),
    }

    def related(self, condition: Q) -> Exists:
        return _has_run(condition)


class FeedbackFilter(RelatedChoicesFilter):
    """Conversations whose answers were rated: up, down, with a comment, at all, or never."""

    title = _("feedback")
    parameter_name = "feedback"
    CHOICES = {
        "up": (_("rated +1"), Q(rating=Rating.UP)),
        "down": (_("rated -1"), Q(rating=Rating.DOWN)),
        "commented": (_("with a comment"), ~Q(comment="")),
        "any": (_("rated"), Q()),
        "none": (_("never rated"), Q()),
    }

    def related(self, condition: Q) -> Exists:
        return Exists(Feedback.objects.filter(condition, message__conversation=OuterRef("pk")))


class LifecycleFilter(admin.SimpleListFilter):
    """Conversations by their place in their life: in the list, archived, in the trash."""

    title = _("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, StrOrPromise]]:
        return [
            ("active", _("in the list")),
            ("archived", _("archived")),
            ("trashed", _("in the trash")),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        if self.value() == "active":
            return queryset.filter(archived_at__isnull=True, trashed_at__isnull=True)
        if self.value() == "archived":
            return queryset.filter(archived_at__isnull=False, trashed_at__isnull=True)
        if self.value() == "trashed":
            return queryset.filter(trashed_at__isnull=False)
        return None
