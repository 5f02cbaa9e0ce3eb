"""The usage page of the admin: spend and tokens per day, by model and by user.

Served by ``ConversationAdmin`` at ``<admin>/llm_conversations/conversation/usage/``
(linked from the conversation list). Each dimension is one aggregate query
(``conversations/usage.py``) drawn as two charts; ``?format=csv&by=model`` (or
``by=user``) downloads the same rows.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from llm_conversations.admin.charts import Chart, stacked_chart
from llm_conversations.conversations.usage import (
    UsageRow,
    UsageWindow,
    usage_by_model,
    usage_by_user,
    usage_window,
)
from llm_conversations.core.model_info import cost_shown, cost_text

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

__all__ = ["CSV_COLUMNS", "DIMENSIONS", "Dimension", "usage_view"]

CSV_COLUMNS = (
    "day",
    "model",
    "turns",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "cached_tokens",
    "cache_write_tokens",
)
"""The CSV header; the second column is ``user`` for ``by=user``. The cache columns
(input tokens read from and written to the provider's prompt cache, part of
``input_tokens``) come last, so files read by position keep their columns."""


@dataclass(frozen=True, slots=True)
class Dimension:
    """One way of splitting usage: its name in URLs, its label and its query."""

    name: str
    label: Any
    rows: Callable[[UsageWindow], list[UsageRow]]


DIMENSIONS = {
    "model": Dimension("model", _("model"), usage_by_model),
    "user": Dimension("user", _("user"), usage_by_user),
}


def dollars(amount: Decimal | int) -> str:
    """Dollars on a chart: four places, more for fractions of a hundredth of a cent."""
    value = Decimal(amount)
    if value and abs(value) < Decimal("0.0001"):
        return f"${value.normalize():f}"
    return f"${value.quantize(Decimal('0.0001')):f}"


def tokens(amount: Decimal | int) -> str:
    """Tokens on a chart: whole, with thousands separators."""
    return f"{int(amount):,}"


@dataclass(frozen=True, slots=True)
class Totals:
    """One key's sums over the window, for the table under the charts."""

    key: str
    turns: int
    input_tokens: int
    output_tokens: int
    cost: str
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def cache_hit_share(self) -> str:
        """The share of input read from the prompt cache, as shown: ``42.0%``; ``""`` for none."""
        if not self.input_tokens:
            return ""
        return f"{self.cached_tokens / self.input_tokens:.1%}"


def totals(rows: Sequence[UsageRow]) -> list[Totals]:
    """Sums per key over the window, the most expensive first."""
    sums: dict[str, list[Any]] = {}
    for row in rows:
        entry = sums.setdefault(row.key, [0, 0, 0, Decimal(0), 0, 0, 0])
        entry[0] += row.turns
        entry[1] += row.input_tokens
        entry[2] += row.output_tokens
        entry[3] += row.cost
        entry[4] += row.cached_tokens
        entry[5] += row.cache_write_tokens
        entry[6] += row.reasoning_tokens
    ranked = sorted(sums.items(), key=lambda item: (-item[1][3], -item[1][1] - item[1][2], item[0]))
    return [
        Totals(k, t, i, o, cost_shown(c), cached, written, reasoning)
        for k, (t, i, o, c, cached, written, reasoning) in ranked
    ]


# A cell starting with one of these is a formula to a spreadsheet (OWASP's CSV injection).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet runs: a leading formula character is quoted."""
    return f"'{text}" if text.startswith(_FORMULA_STARTS) else text


def csv_response(dimension: Dimension, window: UsageWindow) -> HttpResponse:
    """The rows of one dimension as CSV: one line per day and key, costs exact."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    filename = f"usage-by-{dimension.name}-{window.first}-{window.last}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow((CSV_COLUMNS[0], dimension.name, *CSV_COLUMNS[2:]))
    for row in dimension.rows(window):
        writer.writerow(
            (
                row.day.isoformat(),
                spreadsheet_safe(row.key),
                row.turns,
                row.input_tokens,
                row.output_tokens,
                cost_text(row.cost),
                row.cached_tokens,
                row.cache_write_tokens,
            )
        )
    return response


def charts(
    dimension: Dimension, window: UsageWindow, rows: Sequence[UsageRow], ranking: Sequence[str]
) -> list[Chart]:
    """Spend and tokens per day for one dimension; keys in ``ranking`` order and colours."""
    label = dimension.label
    return [
        stacked_chart(
            gettext("Spend per day by %(by)s (USD)") % {"by": label},
            window.days,
            rows,
            lambda row: row.cost,
            dollars,
            ranking,
        ),
        stacked_chart(
            gettext("Tokens per day by %(by)s (input and output)") % {"by": label},
            window.days,
            rows,
            lambda row: row.tokens,
            tokens,
            ranking,
        ),
    ]


def usage_view(model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    """The page, or with ``?format=csv`` one dimension's CSV (``by=model`` or ``by=user``).

    Staff with the view permission on conversations only: the admin site's
    ``admin_view`` sends others to the login page, and this refuses staff
    who may not see conversations.
    """
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    window = usage_window()
    if request.GET.get("format") == "csv":
        dimension = DIMENSIONS.get(request.GET.get("by", "model"))
        if dimension is None:
            return HttpResponse(
                gettext("by must be model or user."), status=400, content_type="text/plain"
            )
        return csv_response(dimension, window)
    sections = []
    for dimension in DIMENSIONS.values():
        rows = dimension.rows(window)
        sums = totals(rows)
        ranking = [entry.key for entry in sums]
        sections.append(
            {
                "dimension": dimension,
                "charts": charts(dimension, window, rows, ranking),
                "totals": sums,
            }
        )
    opts = model_admin.model._meta
    context = {
        **model_admin.admin_site.each_context(request),
        "title": gettext("Usage: the last %(days)d days") % {"days": len(window.days)},
        "opts": opts,
        "window": window,
        "sections": sections,
    }
    return TemplateResponse(request, "llm_conversations/admin/usage.html", context)
