"""Stacked bar charts of usage rows, as geometry a template draws in SVG.

No JavaScript and nothing fetched: the server computes every bar, and the
template (``llm_conversations/admin/chart.html``) writes them as ``<rect>``
elements with a ``<title>`` each for the tooltip.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from llm_conversations.conversations.usage import UsageRow

__all__ = ["Bar", "Chart", "Series", "Tick", "stacked_chart"]

WIDTH = 760
HEIGHT = 240
# Room for the y labels on the left and the day labels below.
LEFT = 64
RIGHT = 24
BOTTOM = 24
TOP = 8
PALETTE = (
    "#2b6cb0",
    "#2f855a",
    "#b7791f",
    "#c53030",
    "#6b46c1",
    "#2c7a7b",
    "#d53f8c",
    "#4a5568",
)
OTHERS_COLOR = "#a0aec0"
MAX_SERIES = len(PALETTE)
"""Series drawn on their own; the rest are stacked together as "others"."""

Number = Decimal | int


@dataclass(frozen=True, slots=True)
class Series:
    """One stacked series: a model or a user, with its colour and total."""

    label: str
    color: str
    total: str


@dataclass(frozen=True, slots=True)
class Bar:
    """One segment of one day's stack."""

    x: float
    y: float
    width: float
    height: float
    color: str
    day: date
    series: str
    value: str


@dataclass(frozen=True, slots=True)
class Tick:
    """A labelled position on an axis."""

    position: float
    label: str


@dataclass(slots=True)
class Chart:
    """A stacked bar chart: bars, legend, axes; ``empty`` when nothing was used."""

    title: str
    width: int = WIDTH
    height: int = HEIGHT
    bars: list[Bar] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    total: str = ""
    left: int = LEFT
    bottom: float = HEIGHT - BOTTOM

    @property
    def empty(self) -> bool:
        return not self.bars


def _nice_ceiling(value: float) -> float:
    """The axis top: 1, 2 or 5 times a power of ten, at least ``value``."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(step * power for step in (1.0, 2.0, 5.0, 10.0) if value <= step * power)


def stacked_chart(
    title: str,
    days: Sequence[date],
    rows: Sequence[UsageRow],
    value: Callable[[UsageRow], Number],
    text: Callable[[Number], str],
    ranking: Sequence[str] | None = None,
) -> Chart:
    """Bars per day stacked by ``row.key``, the biggest series first.

    ``value`` picks what a row contributes (its cost, its tokens) and
    ``text`` formats a value. ``ranking`` orders the keys instead (charts of
    the same rows that share it give each key the same colour). Beyond
    ``MAX_SERIES`` keys, the last are drawn together as "others". Days
    without rows have no bar.
    """
    totals: dict[str, Number] = defaultdict(int)
    for row in rows:
        totals[row.key] += value(row)
    chart = Chart(title=title)
    shown, others = _legend(chart, totals, text, ranking)
    stacks = _stacks(rows, value, shown, others)
    top = _nice_ceiling(max((float(sum(s.values())) for s in stacks.values()), default=0.0))
    _draw_bars(chart, days, stacks, top, text)
    _draw_axes(chart, days, top, totals, text)
    return chart


def _legend(
    chart: Chart,
    totals: dict[str, Number],
    text: Callable[[Number], str],
    ranking: Sequence[str] | None,
) -> tuple[set[str], str]:
    """The chart's series, total and colours. Returns the keys drawn as their own series
    and the label of the rest, drawn together as the last series ("N others")."""
    if ranking is None:
        ranking = sorted(totals, key=lambda k: (-totals[k], k))
    ranked = [k for k in ranking if totals.get(k)]
    shown = ranked if len(ranked) <= MAX_SERIES else ranked[: MAX_SERIES - 1]
    others = [k for k in ranked if k not in shown]
    # Colours follow the ranking, so a key keeps its colour in every chart that shares it.
    position = {key: n for n, key in enumerate(ranking)}
    chart.series = [Series(k, PALETTE[position[k] % len(PALETTE)], text(totals[k])) for k in shown]
    label = f"{len(others)} others"
    if others:
        other_total = sum((totals[k] for k in others), start=type(totals[others[0]])(0))
        chart.series.append(Series(label, OTHERS_COLOR, text(other_total)))
    chart.total = text(sum((totals[k] for k in ranked), start=0))
    return set(shown), label


def _stacks(
    rows: Sequence[UsageRow],
    value: Callable[[UsageRow], Number],
    shown: set[str],
    others: str,
) -> dict[date, dict[str, Number]]:
    """One stack per day: values by series label (a key not ``shown`` counts as ``others``)."""
    stacks: dict[date, dict[str, Number]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        amount = value(row)
        if amount:
            stacks[row.day][row.key if row.key in shown else others] += amount
    return stacks


def _day_width(chart: Chart, days: Sequence[date]) -> float:
    """The width of one day's slot on the plot."""
    return (chart.width - chart.left - RIGHT) / max(1, len(days))


def _draw_bars(
    chart: Chart,
    days: Sequence[date],
    stacks: dict[date, dict[str, Number]],
    top: float,
    text: Callable[[Number], str],
) -> None:
    """Each day's stack as bars, in legend order, ``top`` at the plot's top."""
    plot_height = chart.bottom - TOP
    slot = _day_width(chart, days)
    for index, day in enumerate(days):
        x = round(chart.left + index * slot + slot * 0.15, 2)
        y = chart.bottom
        for series in chart.series:
            amount = stacks[day].get(series.label, 0) if day in stacks else 0
            if not amount:
                continue
            height = float(amount) / top * plot_height
            y -= height
            chart.bars.append(
                Bar(
                    x,
                    round(y, 2),
                    round(slot * 0.7, 2),
                    round(height, 2),
                    series.color,
                    day,
                    series.label,
                    text(amount),
                )
            )


def _draw_axes(
    chart: Chart,
    days: Sequence[date],
    top: float,
    totals: dict[str, Number],
    text: Callable[[Number], str],
) -> None:
    """The value axis (0, half, ``top``) and a day label every seventh day."""
    plot_height = chart.bottom - TOP
    slot = _day_width(chart, days)
    chart.y_ticks = [
        Tick(round(chart.bottom - plot_height * f, 2), text(_tick_value(top * f, totals)))
        for f in (0, 0.5, 1)
    ]
    # Counted back from today, so the last day is labelled.
    chart.x_ticks = [
        Tick(round(chart.left + (i + 0.5) * slot, 2), day.strftime("%b %d"))
        for i, day in enumerate(days)
        if (len(days) - 1 - i) % 7 == 0
    ]


def _tick_value(amount: float, totals: dict[str, Number]) -> Number:
    """An axis value in the type of the series (whole tokens, or dollars)."""
    if any(isinstance(v, Decimal) for v in totals.values()):
        return Decimal(str(round(amount, 6)))
    return round(amount)
