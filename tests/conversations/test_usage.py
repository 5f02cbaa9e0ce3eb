"""The usage report: spend and tokens per day by model and by user, its admin page and CSV.

Every figure is recomputed here from the stored assistant turns, in Python,
and compared with what the aggregate queries, the page and the CSV say.
"""

from __future__ import annotations

import csv
import io
import zoneinfo
from collections import defaultdict
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from llm_conversations.admin.charts import MAX_SERIES, stacked_chart
from llm_conversations.conversations import append_completion, append_messages, create_conversation
from llm_conversations.conversations.usage import (
    NO_MODEL,
    NO_OWNER,
    UsageRow,
    model_label,
    usage_by_model,
    usage_by_user,
    usage_window,
)
from llm_conversations.core.completions import CompletionResponse, Usage
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.model_info import cost_shown
from llm_conversations.models import Message

pytestmark = pytest.mark.django_db

USAGE = "admin:llm_conversations_conversation_usage"
CHANGELIST = "admin:llm_conversations_conversation_changelist"
NOW = datetime(2026, 11, 30, 15, 0, tzinfo=zoneinfo.ZoneInfo("UTC"))


def turn(
    conversation: Any,
    *,
    at: datetime,
    provider: str,
    model: str,
    tokens: tuple[int, int],
    cost: str | None,
    cache: tuple[int, int] | None = None,
) -> Message:
    """A stored assistant turn (after a user turn) created at ``at``; ``cache`` its
    cache reads and writes, part of its input tokens."""
    append_messages(conversation, [ChatMessage.user("hi")])
    read, written = cache or (None, None)
    reply = CompletionResponse(
        content="hello",
        usage=Usage(
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            cached_tokens=read,
            cache_write_tokens=written,
        ),
        model=model,
        provider=provider,
    )
    row = append_completion(conversation, reply, cost=None if cost is None else Decimal(cost))
    Message.objects.filter(pk=row.pk).update(created_at=at)
    return row


@pytest.fixture
def seeded() -> dict[str, Any]:
    """Two users, a conversation without an owner, two models, turns inside and
    outside the 30 days (the day before the window, and at its first midnight)."""
    users = get_user_model()
    alice = users.objects.create_user("alice")
    bob = users.objects.create_user("bob")
    a = create_conversation(owner=alice)
    b = create_conversation(owner=bob)
    nobody = create_conversation()
    window = usage_window(now=NOW)
    first = window.start
    turn(a, at=NOW, provider="openai", model="gpt-4o", tokens=(1000, 200), cost="0.0045")
    turn(
        a,
        at=NOW - timedelta(hours=1),
        provider="openai",
        model="gpt-4o",
        tokens=(10, 2),
        cost="0.0000450000",
    )
    turn(
        a,
        at=NOW - timedelta(days=3),
        provider="anthropic",
        model="claude-haiku-4-5",
        tokens=(500, 50),
        cost="0.00075",
        cache=(300, 120),
    )
    turn(
        b,
        at=NOW - timedelta(days=3),
        provider="openai",
        model="gpt-4o",
        tokens=(300, 30),
        cost="0.00105",
    )
    turn(b, at=first, provider="openai", model="gpt-4o-mini", tokens=(70, 7), cost="0.0000147")
    # No prices: tokens count, spend does not.
    turn(
        nobody,
        at=NOW - timedelta(days=10),
        provider="ollama",
        model="llama3",
        tokens=(40, 4),
        cost=None,
    )
    # Outside: a microsecond before the window, and a day before it.
    turn(
        a,
        at=first - timedelta(microseconds=1),
        provider="openai",
        model="gpt-4o",
        tokens=(9, 9),
        cost="9",
    )
    turn(
        b, at=first - timedelta(days=1), provider="openai", model="gpt-4o", tokens=(9, 9), cost="9"
    )
    return {"window": window, "alice": alice, "bob": bob}


def recomputed(window: Any, by: str) -> list[UsageRow]:
    """Usage rows rebuilt in Python from every stored assistant turn."""
    sums: dict[tuple[date, str], list[Any]] = defaultdict(lambda: [0, 0, 0, Decimal(0), 0, 0])
    for row in Message.objects.filter(role="assistant").select_related("conversation__owner"):
        day = timezone.localdate(row.created_at)
        if not window.first <= day <= window.last:
            continue
        if by == "model":
            key = model_label(row.provider, row.model)
        else:
            owner = row.conversation.owner
            key = owner.username if owner else NO_OWNER
        entry = sums[(day, key)]
        entry[0] += 1
        entry[1] += row.input_tokens or 0
        entry[2] += row.output_tokens or 0
        entry[3] += row.cost or Decimal(0)
        entry[4] += row.cached_tokens or 0
        entry[5] += row.cache_write_tokens or 0
    return [
        UsageRow(day, key, t, i, o, c, cached_tokens=read, cache_write_tokens=written)
        for (day, key), (t, i, o, c, read, written) in sorted(sums.items())
    ]


def test_usage_by_model_equals_the_stored_rows_in_one_query(
    seeded: dict[str, Any], django_assert_num_queries: Any
) -> None:
    window = seeded["window"]
    with django_assert_num_queries(1):
        rows = usage_by_model(window)
    assert rows == recomputed(window, "model")
    today = date(2026, 11, 30)
    assert [r for r in rows if r.day == today] == [
        UsageRow(today, "gpt-4o (openai)", 2, 1010, 202, Decimal("0.0045450000"))
    ]
    # The first day of the window is in, the microsecond before it is out.
    assert rows[0] == UsageRow(window.first, "gpt-4o-mini (openai)", 1, 70, 7, Decimal("0.0000147"))
    assert window.first == date(2026, 11, 1)
    assert sum(r.cost for r in rows) == Decimal("0.0063597")
    assert any(r.key == "llama3 (ollama)" and r.cost == 0 and r.tokens == 44 for r in rows)


def test_usage_by_user_equals_the_stored_rows_in_one_query(
    seeded: dict[str, Any], django_assert_num_queries: Any
) -> None:
    window = seeded["window"]
    with django_assert_num_queries(1):
        rows = usage_by_user(window)
    assert rows == recomputed(window, "user")
    assert {r.key for r in rows} == {"alice", "bob", NO_OWNER}
    day = date(2026, 11, 27)
    assert [r for r in rows if r.day == day] == [
        UsageRow(
            day, "alice", 1, 500, 50, Decimal("0.00075"), cached_tokens=300, cache_write_tokens=120
        ),
        UsageRow(day, "bob", 1, 300, 30, Decimal("0.00105")),
    ]


def test_days_are_those_of_the_current_time_zone() -> None:
    owner = get_user_model().objects.create_user("night")
    conversation = create_conversation(owner=owner)
    # 03:00 UTC on Nov 30 is still Nov 29 in New York (UTC-5).
    at = datetime(2026, 11, 30, 3, 0, tzinfo=zoneinfo.ZoneInfo("UTC"))
    turn(conversation, at=at, provider="openai", model="gpt-4o", tokens=(1, 1), cost="1")
    assert [r.day for r in usage_by_model(usage_window(now=NOW))] == [date(2026, 11, 30)]
    with timezone.override(zoneinfo.ZoneInfo("America/New_York")):
        window = usage_window(now=NOW)
        assert [r.day for r in usage_by_model(window)] == [date(2026, 11, 29)]
        assert usage_by_model(window) == recomputed(window, "model")
    with timezone.override(zoneinfo.ZoneInfo("Asia/Tokyo")):
        # 12:00 in Tokyo; the window is the 30 days up to Dec 1 there.
        window = usage_window(now=NOW)
        assert window.last == date(2026, 12, 1)
        assert [r.day for r in usage_by_user(window)] == [date(2026, 11, 30)]


def test_the_window_is_thirty_whole_days_ending_today() -> None:
    window = usage_window(now=NOW)
    assert len(window.days) == 30
    assert (window.days[0], window.days[-1]) == (date(2026, 11, 1), date(2026, 11, 30))
    assert window.start == datetime(2026, 11, 1, tzinfo=zoneinfo.ZoneInfo("UTC"))
    assert window.end == datetime(2026, 12, 1, tzinfo=zoneinfo.ZoneInfo("UTC"))
    with pytest.raises(ValueError, match="at least one day"):
        usage_window(0)


# The admin page ---------------------------------------------------------------------


@pytest.fixture
def staff_client() -> Client:
    user = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def frozen_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timezone, "now", lambda: NOW)


def csv_rows(response: Any) -> list[list[str]]:
    return list(csv.reader(io.StringIO(response.content.decode())))


@pytest.mark.usefixtures("frozen_now")
def test_page_shows_the_totals_and_charts_in_four_queries(
    seeded: dict[str, Any], staff_client: Client, django_assert_num_queries: Any
) -> None:
    # The session, the user, one aggregate per dimension.
    with django_assert_num_queries(4):
        response = staff_client.get(reverse(USAGE))
    assert response.status_code == 200
    window = seeded["window"]
    by_model, by_user = response.context["sections"]
    for section, by in ((by_model, "model"), (by_user, "user")):
        expected = recomputed(window, by)
        totals = {t.key: t for t in section["totals"]}
        keys = {r.key for r in expected}
        assert set(totals) == keys
        for key in keys:
            mine = [r for r in expected if r.key == key]
            assert totals[key].turns == sum(r.turns for r in mine)
            assert totals[key].input_tokens == sum(r.input_tokens for r in mine)
            assert totals[key].output_tokens == sum(r.output_tokens for r in mine)
            # Shown to a millionth of a dollar (core/model_info.cost_shown).
            assert totals[key].cost == cost_shown(sum(r.cost for r in mine))
        spend, tokens = section["charts"]
        # One bar per day and key with a non-zero value.
        assert len(spend.bars) == sum(1 for r in expected if r.cost)
        assert len(tokens.bars) == sum(1 for r in expected if r.tokens)
        assert spend.total == "$0.0064"
        assert tokens.total == f"{sum(r.tokens for r in expected):,}"
    page = response.content.decode()
    assert (
        page.count('<rect class="llmconv-bar"') == 4 + 5 + 4 + 5
    )  # the unpriced llama3 turn has tokens, no spend
    assert "<td>gpt-4o (openai)</td>" in page
    assert '<td class="llmconv-num">0.005595</td>' in page  # gpt-4o: 0.0045 + 0.000045 + 0.00105
    assert "<script" not in page.split('id="content-main"')[1]


@pytest.mark.usefixtures("frozen_now")
def test_turns_without_a_model_are_labelled_no_model(staff_client: Client) -> None:
    conversation = create_conversation()
    day = NOW - timedelta(hours=1)
    turn(conversation, at=day, provider="", model="", tokens=(1, 2), cost=None)
    turn(conversation, at=day, provider="openai", model="", tokens=(3, 4), cost=None)
    assert model_label("", "") == NO_MODEL == "(no model)"
    response = staff_client.get(reverse(USAGE), {"format": "csv", "by": "model"})
    _header, *lines = csv_rows(response)
    assert [line[1:5] for line in lines] == [
        ["(no model)", "1", "1", "2"],
        ["(no model) (openai)", "1", "3", "4"],
    ]
    assert "?" not in response.content.decode()


@pytest.mark.usefixtures("frozen_now")
@pytest.mark.parametrize("by", ["model", "user"])
def test_csv_holds_the_same_rows_in_one_query(
    seeded: dict[str, Any], staff_client: Client, django_assert_num_queries: Any, by: str
) -> None:
    with django_assert_num_queries(3):
        response = staff_client.get(reverse(USAGE), {"format": "csv", "by": by})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == (
        f'attachment; filename="usage-by-{by}-2026-11-01-2026-11-30.csv"'
    )
    header, *lines = csv_rows(response)
    assert header == [
        "day",
        by,
        "turns",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "cached_tokens",
        "cache_write_tokens",
    ]
    assert lines == [
        [
            r.day.isoformat(),
            r.key,
            str(r.turns),
            str(r.input_tokens),
            str(r.output_tokens),
            f"{r.cost.quantize(Decimal('1e-10')):f}",
            str(r.cached_tokens),
            str(r.cache_write_tokens),
        ]
        for r in recomputed(seeded["window"], by)
    ]


@pytest.mark.usefixtures("frozen_now")
@pytest.mark.parametrize("model", ['=HYPERLINK("http://evil.example","x")', "+1", "-2", "@SUM(A1)"])
def test_csv_cells_never_start_a_formula(staff_client: Client, model: str) -> None:
    turn(
        create_conversation(),
        at=NOW,
        provider="openai",
        model=model,
        tokens=(1, 1),
        cost="0.01",
    )
    _header, *lines = csv_rows(staff_client.get(reverse(USAGE), {"format": "csv", "by": "model"}))
    keys = {line[1] for line in lines if line[2] != "0"}
    assert len(keys) == 1
    (key,) = keys
    assert key.startswith("'")
    assert key.removeprefix("'").startswith(model)


def test_csv_refuses_an_unknown_dimension(staff_client: Client) -> None:
    response = staff_client.get(reverse(USAGE), {"format": "csv", "by": "day"})
    assert response.status_code == 400
    assert response.content == b"by must be model or user."


def test_empty_state(staff_client: Client) -> None:
    response = staff_client.get(reverse(USAGE))
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count("No assistant turns in these days.") == 2
    assert "llmconv-bar" not in page
    header, *lines = csv_rows(staff_client.get(reverse(USAGE), {"format": "csv"}))
    assert header[1] == "model"
    assert lines == []


def test_non_staff_are_sent_to_login_and_staff_without_permission_refused() -> None:
    users = get_user_model()
    client = Client()
    url = reverse(USAGE)
    assert client.get(url).status_code == 302
    client.force_login(users.objects.create_user("user"))
    response = client.get(url, {"format": "csv"})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))
    staff = users.objects.create_user("clerk", is_staff=True)
    client.force_login(staff)
    assert client.get(url).status_code == 403
    assert client.get(url, {"format": "csv"}).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    assert client.get(url).status_code == 200


def test_changelist_and_app_index_link_the_usage_page(staff_client: Client) -> None:
    page = staff_client.get(reverse(CHANGELIST)).content.decode()
    assert f'<a href="{reverse(USAGE)}" class="viewlink">Usage</a>' in page
    index = reverse("admin:app_list", kwargs={"app_label": "llm_conversations"})
    page = staff_client.get(index).content.decode()
    link = f'<a href="{reverse(USAGE)}" class="viewlink">Usage: spend and tokens per day</a>'
    assert page.count(link) == 1


def test_app_index_hides_the_link_from_staff_who_may_not_view_conversations() -> None:
    staff = get_user_model().objects.create_user("clerk", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_run"))
    client = Client()
    client.force_login(staff)
    index = reverse("admin:app_list", kwargs={"app_label": "llm_conversations"})
    response = client.get(index)
    assert response.status_code == 200
    assert reverse(USAGE) not in response.content.decode()


# Charts -----------------------------------------------------------------------------


def test_chart_stacks_the_biggest_series_first_and_groups_the_rest() -> None:
    day = date(2026, 11, 30)
    rows = [UsageRow(day, f"user{n:02}", 1, n, 0, Decimal(0)) for n in range(1, 12)]
    chart = stacked_chart("t", [day - timedelta(days=1), day], rows, lambda r: r.tokens, str)
    labels = [s.label for s in chart.series]
    assert labels == [f"user{n:02}" for n in range(11, 4, -1)] + ["4 others"]
    assert len(labels) == MAX_SERIES
    assert chart.series[-1].total == str(1 + 2 + 3 + 4)
    assert chart.total == str(sum(range(1, 12)))
    # One stack on the last day: its segments fill the height up to the axis top (100).
    assert len(chart.bars) == MAX_SERIES
    assert {b.day for b in chart.bars} == {day}
    assert round(sum(b.height for b in chart.bars), 1) == round((chart.bottom - 8) * 66 / 100, 1)
    assert chart.bars[0].y + chart.bars[0].height == chart.bottom
    assert [t.label for t in chart.y_ticks] == ["0", "50", "100"]


def test_chart_of_nothing_is_empty() -> None:
    chart = stacked_chart("t", [date(2026, 11, 30)], [], lambda r: r.cost, str)
    assert chart.empty
    assert chart.series == []
