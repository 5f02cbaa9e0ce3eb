"""Spend and tokens per day, by model and by user: one aggregate query each.

The rows are assistant turns: their stored usage and their stored cost (fixed
when the turn was stored, see :mod:`llm_conversations.conversations.costs`); nothing
is re-priced. Days are calendar days in the current time zone
(``TruncDate`` with ``timezone.get_current_timezone()``), on SQLite and
PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, DecimalField, IntegerField, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from llm_conversations.core.messages import Role
from llm_conversations.core.model_info import COST_DECIMALS, COST_DIGITS
from llm_conversations.models import Message

__all__ = [
    "DEFAULT_DAYS",
    "NO_MODEL",
    "NO_OWNER",
    "UsageRow",
    "UsageWindow",
    "model_label",
    "usage_by_model",
    "usage_by_user",
    "usage_window",
]

DEFAULT_DAYS = 30
NO_OWNER = "(no owner)"
# The key of turns no model is recorded for (stored by a client or imported).
NO_MODEL = "(no model)"
"""The label of conversations without an owner."""

_COST = DecimalField(max_digits=COST_DIGITS, decimal_places=COST_DECIMALS)


@dataclass(frozen=True, slots=True)
class UsageWindow:
    """The days a usage report covers: ``first`` to ``last`` (today), inclusive,
    in the current time zone; ``start`` and ``end`` are the instants that bound them."""

    first: date
    last: date
    start: datetime
    end: datetime

    @property
    def days(self) -> list[date]:
        """Every day of the window, oldest first."""
        return [self.first + timedelta(days=n) for n in range((self.last - self.first).days + 1)]


@dataclass(frozen=True, slots=True)
class UsageRow:
    """What one model (or user) used on one day: turns, tokens and dollars."""

    day: date
    key: str
    turns: int
    input_tokens: int
    output_tokens: int
    cost: Decimal
    cached_tokens: int = 0
    """Input read from the provider's prompt cache (part of ``input_tokens``)."""
    cache_write_tokens: int = 0
    """Input written to the provider's prompt cache (part of ``input_tokens``)."""
    reasoning_tokens: int = 0
    """Output spent reasoning (part of ``output_tokens``)."""

    @property
    def tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens


def usage_window(days: int = DEFAULT_DAYS, *, now: datetime | None = None) -> UsageWindow:
    """The last ``days`` calendar days, today included, in the current time zone."""
    if days < 1:
        raise ValueError("a usage window holds at least one day.")
    zone = timezone.get_current_timezone()
    today = timezone.localtime(now or timezone.now(), zone).date()
    first = today - timedelta(days=days - 1)

    def midnight(day: date) -> datetime:
        return datetime.combine(day, time.min, tzinfo=zone)

    return UsageWindow(first, today, midnight(first), midnight(today + timedelta(days=1)))


def model_label(provider: str, model: str) -> str:
    """How a model is named in reports: ``gpt-4o (openai)``; ``(no model)`` for turns
    that record none (``(no model) (openai)`` when only their provider is known)."""
    name = model or NO_MODEL
    return f"{name} ({provider})" if provider else name


def _turns(window: UsageWindow) -> QuerySet[Message]:
    """Assistant turns of the window."""
    return Message.objects.filter(
        role=Role.ASSISTANT.value, created_at__gte=window.start, created_at__lt=window.end
    ).order_by()


def _day() -> TruncDate:
    """A turn's calendar day in the current time zone."""
    return TruncDate("created_at", tzinfo=timezone.get_current_timezone())


def _sums() -> dict[str, Any]:
    zero = Value(0, output_field=IntegerField())
    return {
        "turns": Count("pk"),
        "input": Coalesce(Sum("input_tokens"), zero),
        "output": Coalesce(Sum("output_tokens"), zero),
        "cached": Coalesce(Sum("cached_tokens"), zero),
        "cache_write": Coalesce(Sum("cache_write_tokens"), zero),
        "reasoning": Coalesce(Sum("reasoning_tokens"), zero),
        "spend": Coalesce(Sum("cost"), Value(Decimal(0)), output_field=_COST),
    }


def _rows(values: Iterable[Mapping[str, Any]], key: Any) -> list[UsageRow]:
    return [
        UsageRow(
            day=row["day"],
            key=key(row),
            turns=row["turns"],
            input_tokens=row["input"],
            output_tokens=row["output"],
            cost=row["spend"],
            cached_tokens=row["cached"],
            cache_write_tokens=row["cache_write"],
            reasoning_tokens=row["reasoning"],
        )
        for row in values
    ]


def usage_by_model(window: UsageWindow) -> list[UsageRow]:
    """Per day and model (provider and model name): one aggregate query, by day then label."""
    values = (
        _turns(window)
        .values("provider", "model", day=_day())
        .annotate(**_sums())
        .order_by("day", "provider", "model")
    )
    rows = _rows(values, lambda row: model_label(row["provider"], row["model"]))
    return sorted(rows, key=lambda row: (row.day, row.key))


def usage_by_user(window: UsageWindow) -> list[UsageRow]:
    """Per day and owner of the conversation: one aggregate query (the user table joined)."""
    username = f"conversation__owner__{get_user_model().USERNAME_FIELD}"
    values = (
        _turns(window)
        .values("conversation__owner_id", username, day=_day())
        .annotate(**_sums())
        .order_by("day", "conversation__owner_id")
    )
    rows = _rows(values, lambda row: str(row[username] or NO_OWNER))
    return sorted(rows, key=lambda row: (row.day, row.key))
