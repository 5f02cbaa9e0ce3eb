"""Feedback: a caller rates the assistant turns of their own conversations."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation, delete_conversation
from llm_conversations.conversations.feedback import delete_feedback, rate_message
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.exceptions import FeedbackError
from llm_conversations.models import MAX_COMMENT_CHARS, Conversation, Feedback, Message

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(user: User) -> Conversation:
    """Positions: 0 system, 1 user, 2 assistant calls, 3 tool result, 4 answer."""
    return create_conversation(
        owner=user,
        messages=[
            ChatMessage.system("Be brief."),
            ChatMessage.user("Time?"),
            ChatMessage.assistant_tool_calls([ToolCall("c1", "get_time")]),
            ChatMessage.tool_result("c1", "09:00"),
            ChatMessage.assistant("It is nine."),
        ],
    )


def at(conversation: Conversation, position: int) -> Message:
    return Message.objects.get(conversation=conversation, position=position)


def url(conversation: Conversation, message: Message | str) -> str:
    pk = message.pk if isinstance(message, Message) else message
    return f"/api/conversations/{conversation.pk}/messages/{pk}/feedback/"


def listed(client: APIClient, conversation: Conversation) -> dict[int, Any]:
    body = client.get(f"/api/conversations/{conversation.pk}/messages/", {"order": "asc"}).json()
    return {item["position"]: item["feedback"] for item in body["data"]}


def test_put_rates_an_answer_and_the_message_shows_it(
    client: APIClient, chat: Conversation, user: User
) -> None:
    answer = at(chat, 4)
    response = client.put(url(chat, answer), {"rating": 1, "comment": "Clear."}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["rating"], body["comment"]) == (1, "Clear.")
    assert body["created_at"] <= body["updated_at"]
    stored = Feedback.objects.get()
    assert (stored.message, stored.user, stored.rating, stored.comment) == (
        answer,
        user,
        1,
        "Clear.",
    )
    assert listed(client, chat) == {
        0: None,
        1: None,
        2: None,
        3: None,
        4: {"rating": 1, "comment": "Clear."},
    }


def test_a_second_put_changes_the_one_rating(client: APIClient, chat: Conversation) -> None:
    calls = at(chat, 2)  # an assistant turn with calls may be rated too
    client.put(url(chat, calls), {"rating": 1, "comment": "Good call."}, format="json")
    first = Feedback.objects.get()
    response = client.put(url(chat, calls), {"rating": -1}, format="json")
    assert response.status_code == 200
    # The comment is replaced too: omitted means empty.
    assert (response.json()["rating"], response.json()["comment"]) == (-1, "")
    changed = Feedback.objects.get()
    assert changed.pk == first.pk
    assert (changed.rating, changed.comment) == (-1, "")
    assert changed.updated_at > first.updated_at
    assert listed(client, chat)[2] == {"rating": -1, "comment": ""}


def test_delete_removes_the_rating_and_is_idempotent(client: APIClient, chat: Conversation) -> None:
    answer = at(chat, 4)
    client.put(url(chat, answer), {"rating": -1, "comment": "Wrong."}, format="json")
    assert client.delete(url(chat, answer)).status_code == 204
    assert not Feedback.objects.exists()
    assert listed(client, chat)[4] is None
    assert client.delete(url(chat, answer)).status_code == 204


@pytest.mark.parametrize("position", [0, 1, 3])
def test_only_assistant_messages_can_be_rated(
    client: APIClient, chat: Conversation, position: int
) -> None:
    response = client.put(url(chat, at(chat, position)), {"rating": 1}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "not_an_assistant_message"
    assert not Feedback.objects.exists()


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"rating": 0}, "invalid_rating", "rating"),
        ({"rating": 5}, "invalid_rating", "rating"),
        ({"rating": "1"}, "invalid", "rating"),
        ({"rating": True}, "invalid", "rating"),
        ({"rating": 1.5}, "invalid", "rating"),
        ({"comment": "no rating"}, "invalid", "rating"),
        ({"rating": 1, "comment": 3}, "invalid", "comment"),
        ({"rating": 1, "comment": "x" * (MAX_COMMENT_CHARS + 1)}, "too_large", "comment"),
        ({"rating": 1, "comment": "nul\x00"}, "invalid_text", "comment"),
        ([{"rating": 1}], "invalid", None),
    ],
)
def test_bad_ratings_are_400_and_store_nothing(
    client: APIClient, chat: Conversation, body: Any, code: str, field: str | None
) -> None:
    response = client.put(url(chat, at(chat, 4)), body, format="json")
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field)
    assert not Feedback.objects.exists()


def test_a_comment_of_the_longest_length_is_kept_as_sent(
    client: APIClient, chat: Conversation
) -> None:
    comment = " padded " + "x" * (MAX_COMMENT_CHARS - 8)
    response = client.put(url(chat, at(chat, 4)), {"rating": 1, "comment": comment}, format="json")
    assert response.status_code == 200
    assert Feedback.objects.get().comment == comment


def test_another_users_messages_do_not_exist(
    client: APIClient, chat: Conversation, other_user: User
) -> None:
    theirs = create_conversation(
        owner=other_user, messages=[ChatMessage.user("Hi"), ChatMessage.assistant("Hello")]
    )
    answer = at(theirs, 1)
    for method in (client.put, client.delete):
        response = method(url(theirs, answer), {"rating": 1}, format="json")
        assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")
        # Nor through the caller's own conversation.
        response = method(url(chat, answer), {"rating": 1}, format="json")
        assert response.status_code == 404
    assert not Feedback.objects.exists()


@pytest.mark.parametrize("message", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_unknown_or_malformed_message_ids_are_404(
    client: APIClient, chat: Conversation, message: str
) -> None:
    response = client.put(url(chat, message), {"rating": 1}, format="json")
    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")


def test_anonymous_callers_cannot_rate(anonymous: APIClient, chat: Conversation) -> None:
    response = anonymous.put(url(chat, at(chat, 4)), {"rating": 1}, format="json")
    assert response.status_code in (401, 403)
    assert not Feedback.objects.exists()


def test_the_list_shows_only_the_callers_rating(
    client: APIClient, chat: Conversation, other_user: User
) -> None:
    # Ratings by others (a shared conversation, a reviewer) stay theirs.
    rate_message(at(chat, 4), other_user, -1, "theirs")
    assert listed(client, chat)[4] is None
    client.put(url(chat, at(chat, 4)), {"rating": 1}, format="json")
    assert listed(client, chat)[4] == {"rating": 1, "comment": ""}
    assert Feedback.objects.count() == 2


@pytest.mark.parametrize("limit", [5, 100])
def test_the_list_reads_ratings_without_a_query_per_message(
    client: APIClient, user: User, other_user: User, limit: int
) -> None:
    turns: list[ChatMessage] = []
    for index in range(60):
        turns += [ChatMessage.user(f"q{index}"), ChatMessage.assistant(f"a{index}")]
    conversation = create_conversation(owner=user, messages=turns)
    for message in Message.objects.filter(conversation=conversation, role="assistant"):
        rate_message(message, user, 1 if message.position % 4 == 1 else -1, f"p{message.position}")
        rate_message(message, other_user, 1)
    with CaptureQueriesContext(connection) as queries:
        body = client.get(
            f"/api/conversations/{conversation.pk}/messages/", {"limit": limit, "order": "asc"}
        ).json()
    # The conversation (owner check) and one page of rows with the caller's ratings.
    assert len(queries) == 2
    assert len(body["data"]) == limit
    for item in body["data"]:
        position = item["position"]
        expected = (
            {"rating": 1 if position % 4 == 1 else -1, "comment": f"p{position}"}
            if item["role"] == "assistant"
            else None
        )
        assert item["feedback"] == expected


def test_the_service_applies_the_same_rules(chat: Conversation, user: User) -> None:
    with pytest.raises(FeedbackError) as raised:
        rate_message(at(chat, 1), user, 1)
    assert (raised.value.code, raised.value.field) == ("not_an_assistant_message", None)
    for rating in (0, True, "1", None):
        with pytest.raises(FeedbackError, match="rating must be 1 or -1") as raised:
            rate_message(at(chat, 4), user, rating)  # type: ignore[arg-type]
        assert raised.value.code == "invalid_rating"
    with pytest.raises(FeedbackError) as raised:
        rate_message(at(chat, 4), user, 1, None)  # type: ignore[arg-type]
    assert raised.value.code == "invalid_comment"
    assert not Feedback.objects.exists()
    assert delete_feedback(at(chat, 4), user) is False
    rate_message(at(chat, 4), user, -1)
    assert delete_feedback(at(chat, 4), user) is True


def test_the_database_keeps_one_valid_rating_per_user_and_message(
    chat: Conversation, user: User
) -> None:
    answer = at(chat, 4)
    Feedback.objects.create(message=answer, user=user, rating=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Feedback.objects.create(message=answer, user=user, rating=-1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Feedback.objects.filter(message=answer).update(rating=2)
    assert Feedback.objects.get().rating == 1


def test_deleting_a_conversation_deletes_its_feedback(chat: Conversation, user: User) -> None:
    rate_message(at(chat, 4), user, 1)
    delete_conversation(chat)
    assert not Feedback.objects.exists()
