"""Search: conversations by title and message text, a conversation's messages by text.

Full-text search with a GIN index on PostgreSQL, substring matching on SQLite;
the tests marked for one database check what differs (docs/feedback-search-titles.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from llm_conversations.conversations import append_messages, create_conversation
from llm_conversations.conversations.search import (
    MAX_SEARCH_CHARS,
    SEARCH_INDEX,
    matching_messages,
    search_conversations,
    search_terms,
)
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.models import Conversation, Message

pytestmark = pytest.mark.django_db

URL = "/api/conversations/"
on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="full-text search is PostgreSQL's"
)
on_sqlite = pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite fallback")


def trip(owner: User, title: str = "") -> Conversation:
    """A system prompt, a question, a tool call and its result, an answer."""
    return create_conversation(
        owner=owner,
        title=title,
        messages=[
            ChatMessage.system("You plan journeys; mention Zanzibar never."),
            ChatMessage.user("Is the ferry to Stavanger running?"),
            ChatMessage.assistant_tool_calls([ToolCall("c1", "timetable", {"port": "Bergen"})]),
            ChatMessage.tool_result("c1", '{"departures": ["08:15"], "operator": "Fjordline"}'),
            ChatMessage.assistant("Yes: the morning crossing leaves at quarter past eight."),
        ],
    )


def titles(client: APIClient, **params: Any) -> list[str]:
    response = client.get(URL, params)
    assert response.status_code == 200, response.json()
    return [item["title"] for item in response.json()["results"]]


@pytest.fixture
def library(user: User, other_user: User) -> dict[str, Conversation]:
    found = {
        "trip": trip(user, "trip"),
        "cooking": create_conversation(
            owner=user,
            title="cooking",
            messages=[ChatMessage.user("How long do I boil an egg?")],
        ),
        "titled ferry": create_conversation(owner=user, title="Ferry plans"),
    }
    append_messages(found["cooking"], [ChatMessage.assistant("Seven minutes for a soft egg.")])
    trip(other_user, "their trip")
    return found


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Stavanger", {"trip"}),  # a user turn
        ("quarter", {"trip"}),  # an answer
        ("fjordline", {"trip"}),  # a tool result, case-insensitively
        ("egg", {"cooking"}),  # a question and an answer: one row
        ("ferry", {"trip", "Ferry plans"}),  # a message, or a title
        ("morning crossing", {"trip"}),  # every word, in one message
        ("soft ferry", set()),  # words of two conversations
        ("zanzibar", set()),  # system turns are not searched
        ("bergen", set()),  # nor tool-call arguments
        ("   ", {"trip", "cooking", "Ferry plans"}),  # blank: no filter
    ],
)
def test_conversations_are_found_by_message_text_and_title(
    client: APIClient, library: dict[str, Conversation], text: str, expected: set[str]
) -> None:
    found = titles(client, search=text)
    assert set(found) == expected
    assert len(found) == len(expected)  # a conversation is listed once
    assert "their trip" not in found


def test_only_the_callers_conversations_are_searched(
    client: APIClient, user: User, other_user: User
) -> None:
    trip(other_user, "theirs")
    assert titles(client, search="Stavanger") == []
    trip(user, "mine")
    assert titles(client, search="Stavanger") == ["mine"]


@pytest.mark.parametrize("size", [1, 20])
def test_a_search_costs_two_queries_at_any_page_size(
    client: APIClient, user: User, size: int
) -> None:
    for index in range(25):
        trip(user, f"t{index}")
    with CaptureQueriesContext(connection) as queries:
        body = client.get(URL, {"search": "fjordline", "page_size": size}).json()
    assert body["count"] == 25
    assert len(body["results"]) == size
    # One COUNT and one page: the message match is a subquery, the rank too.
    assert len(queries) == 2


def test_explicit_ordering_wins_over_relevance(client: APIClient, user: User) -> None:
    for title in ("b", "a", "c"):
        trip(user, title)
    assert titles(client, search="ferry", ordering="title") == ["a", "b", "c"]
    assert titles(client, search="ferry", ordering="-title") == ["c", "b", "a"]


def test_search_text_is_bounded(client: APIClient, library: dict[str, Conversation]) -> None:
    response = client.get(URL, {"search": "x" * (MAX_SEARCH_CHARS + 1)})
    assert (response.status_code, response.json()["error"]["field"]) == (400, "search")
    # The limit holds on the text as sent, spaces included.
    response = client.get(URL, {"search": " " + "x" * MAX_SEARCH_CHARS})
    assert (response.status_code, response.json()["error"]["field"]) == (400, "search")
    assert titles(client, search="ferry " + "x" * (MAX_SEARCH_CHARS - 6)) == []


@on_postgresql
def test_postgresql_ranks_the_best_matches_first(client: APIClient, user: User) -> None:
    once = create_conversation(owner=user, title="once", messages=[ChatMessage.user("a ferry")])
    often = create_conversation(
        owner=user,
        title="often",
        messages=[ChatMessage.user("ferry ferry ferry: which ferry is the fastest ferry?")],
    )
    create_conversation(owner=user, title="ferry in the title only")
    # The most recently active first without a search, the best match first with one.
    append_messages(once, [ChatMessage.assistant("noted")])
    assert titles(client) == ["once", "ferry in the title only", "often"]
    assert titles(client, search="ferry") == ["often", "once", "ferry in the title only"]
    assert often.message_count == 1


@on_postgresql
def test_postgresql_takes_web_search_syntax(client: APIClient, user: User) -> None:
    trip(user, "trip")
    create_conversation(
        owner=user,
        title="other",
        messages=[ChatMessage.user("a crossing from Oslo in the morning")],
    )
    assert set(titles(client, search="morning crossing")) == {"trip", "other"}
    assert titles(client, search='"morning crossing"') == ["trip"]
    assert titles(client, search="morning -quarter") == ["other"]
    assert set(titles(client, search="stavanger or oslo")) == {"trip", "other"}
    # Whole words only: no stemming ('simple'), no prefixes.
    assert titles(client, search="cross") == []


@on_sqlite
def test_sqlite_matches_substrings_of_every_term(client: APIClient, user: User) -> None:
    trip(user, "trip")
    assert titles(client, search="cross") == ["trip"]
    assert titles(client, search="STAVANG ferr") == ["trip"]
    assert titles(client, search='"morning crossing"') == ["trip"]
    assert titles(client, search='"crossing morning"') == []
    # No relevance order: the default (last activity) or the one asked for.
    create_conversation(owner=user, title="later", messages=[ChatMessage.user("cross")])
    assert titles(client, search="cross") == ["later", "trip"]


@on_postgresql
def test_postgresql_serves_message_search_from_the_gin_index(user: User) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [SEARCH_INDEX])
        (definition,) = cursor.fetchone()
    assert "USING gin" in definition
    assert "to_tsvector('simple'::regconfig" in definition
    trip(user, "trip")
    rows = matching_messages(Message.objects.all(), "fjordline")
    sql, params = rows.values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        # Tiny tables are scanned; without that choice the planner must use the index.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert SEARCH_INDEX in plan, plan


@on_sqlite
def test_sqlite_has_no_search_index() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        names = {row[0] for row in cursor.fetchall()}
    assert "llmconv_feedback_rating" in names  # the migration ran
    assert SEARCH_INDEX not in names


def test_search_terms_keep_quoted_phrases() -> None:
    assert search_terms(" morning  \"quarter past\" 'eight o' ") == [
        "morning",
        "quarter past",
        "eight o",
    ]
    assert search_terms('  ""  ') == []


def test_the_service_searches_any_queryset(user: User, other_user: User) -> None:
    mine = trip(user, "mine")
    trip(other_user, "theirs")
    found = search_conversations(Conversation.objects.filter(owner=user), "fjordline")
    assert list(found) == [mine]
    assert matching_messages(Message.objects.filter(conversation=mine), "").count() == 5


# Messages of one conversation --------------------------------------------------


def messages_url(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/messages/"


def test_messages_are_filtered_by_text(client: APIClient, user: User) -> None:
    conversation = trip(user, "trip")
    append_messages(
        conversation,
        [
            ChatMessage.user("And the ferry back?"),
            ChatMessage.assistant("The ferry returns at six."),
        ],
    )
    body = client.get(messages_url(conversation), {"search": "ferry", "order": "asc"}).json()
    assert [(m["position"], m["role"]) for m in body["data"]] == [
        (1, "user"),
        (5, "user"),
        (6, "assistant"),
    ]
    assert body["has_more"] is False
    tool = client.get(messages_url(conversation), {"search": "Fjordline"}).json()["data"]
    assert [m["position"] for m in tool] == [3]
    assert client.get(messages_url(conversation), {"search": "Zanzibar"}).json()["data"] == []


def test_message_search_pages_with_the_cursor(client: APIClient, user: User) -> None:
    turns: list[ChatMessage] = []
    for index in range(30):
        word = "ferry" if index % 3 == 0 else "train"
        turns += [ChatMessage.user(f"{word} {index}?"), ChatMessage.assistant(f"{word} ok")]
    conversation = create_conversation(owner=user, messages=turns)
    seen: list[int] = []
    after = None
    while True:
        params: dict[str, Any] = {"search": "ferry", "limit": 7, "order": "asc"}
        if after:
            params["after"] = after
        with CaptureQueriesContext(connection) as queries:
            body = client.get(messages_url(conversation), params).json()
        # The conversation, the page (its cursor looked up inside it).
        assert len(queries) == 2
        seen += [m["position"] for m in body["data"]]
        if not body["has_more"]:
            break
        after = body["last_id"]
    expected = [p for p in range(60) if (p // 2) % 3 == 0]
    assert seen == expected
    newest = client.get(messages_url(conversation), {"search": "ferry", "limit": 2}).json()
    assert [m["position"] for m in newest["data"]] == expected[::-1][:2]


def test_message_search_text_is_bounded(client: APIClient, user: User) -> None:
    conversation = trip(user)
    response = client.get(messages_url(conversation), {"search": "x" * (MAX_SEARCH_CHARS + 1)})
    assert (response.status_code, response.json()["error"]["field"]) == (400, "search")
    response = client.get(messages_url(conversation), {"search": "x" * MAX_SEARCH_CHARS + " "})
    assert (response.status_code, response.json()["error"]["field"]) == (400, "search")
