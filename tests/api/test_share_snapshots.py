"""What a share link goes on showing after the owner changes the conversation: turns
rolled back and replaced, turns hidden before or after the link, edits, forks and
the trash; and how its answers are cached.

A snapshot names the messages it showed when made. Every reader of a link (the
API, its attachments, the page and "continue as a fork") shows those messages
less the ones hidden or removed since, and nothing else.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.conversations.shares import create_share
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Conversation, Message, ShareLink
from llm_conversations.runs import ToolLoopService
from tests.api.test_runs import start
from tests.api.test_shares import (
    error_code,
    message_id,
    picture_turn,
    share,
    shares_url,
    with_image,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_cache", "media_root")]

SECRET = "Secret question"
REASON = "owner's private reason"
HIDDEN_TEXTS = ("An aside to hide.", "get_time", "09:00", REASON)


def shared(reader: APIClient, token: str) -> dict[str, Any]:
    response = reader.get(f"/api/shared/{token}/")
    assert response.status_code == 200, response.json()
    body: dict[str, Any] = response.json()
    return body


def shared_texts(reader: APIClient, token: str) -> list[str]:
    return [m["content"] for m in shared(reader, token)["messages"]]


def page_html(token: str) -> str:
    page = Client().get(f"/shared/{token}/")
    assert page.status_code == 200
    return page.content.decode()


def copied(reader: APIClient, token: str) -> Conversation:
    response = reader.post(f"/api/shared/{token}/fork/")
    assert response.status_code == 201, response.json()
    return Conversation.objects.get(pk=response.json()["id"])


# Rolled-back turns and the turns stored in their place ---------------------------


def test_turns_stored_where_rolled_back_ones_were_never_show(
    client: APIClient,
    anonymous: APIClient,
    other: APIClient,
    user: User,
    conversation: Conversation,
) -> None:
    # A run is active (stored, not yet executed) when the link is made: its user
    # turn is in the snapshot.
    ToolLoopService().start(conversation, "Draft question")
    token = share(client, conversation)["token"]
    assert shared_texts(anonymous, token) == ["Hi", "Draft question"]
    # The owner rolls that run back and asks something else, with an image: the new
    # turns take the positions the removed ones had.
    turn, image = picture_turn(user, SECRET)
    run = start(client, conversation, message=turn, if_busy="rollback")
    assert run.status_code == 201, run.json()
    assert [m.position for m in Message.objects.filter(conversation=conversation)] == [0, 1, 2]
    # The link shows what is left of its snapshot, never what came after it.
    body = shared(anonymous, token)
    assert [m["content"] for m in body["messages"]] == ["Hi"]
    assert SECRET not in str(body)
    response = anonymous.get(f"/api/shared/{token}/attachments/{image.pk}/content/")
    assert (response.status_code, error_code(response)) == (404, "not_found")
    assert SECRET not in page_html(token)
    assert Client().get(f"/shared/{token}/attachments/{image.pk}/").status_code == 404
    copy = copied(other, token)
    assert [m.content for m in load_messages(copy)] == ["Hi"]
    assert copy.message_count == 1
    # The owner's own copy is a fork of what the link still shows.
    fork = copied(client, token)
    assert [m.content for m in load_messages(fork)] == ["Hi"]
    assert (fork.forked_from_id, fork.forked_at_position) == (conversation.pk, 1)
    listed = client.get(shares_url(conversation)).json()
    assert (listed[0]["up_to_position"], listed[0]["message_count"]) == (1, 1)


def test_a_link_whose_every_turn_was_rolled_back_shows_nothing(
    client: APIClient, anonymous: APIClient, other: APIClient, user: User
) -> None:
    empty = create_conversation(owner=user, title="Fresh")
    ToolLoopService().start(empty, "Draft question")
    token = share(client, empty)["token"]
    assert start(client, empty, message=SECRET, if_busy="rollback").status_code == 201
    assert shared(anonymous, token)["messages"] == []
    assert SECRET not in page_html(token)
    assert load_messages(copied(other, token)) == []


def test_an_edit_or_a_fork_after_the_link_leaves_the_snapshot_as_it_was(
    client: APIClient, anonymous: APIClient, user: User
) -> None:
    source = create_conversation(
        owner=user,
        messages=[ChatMessage.user("Hello"), ChatMessage.assistant("Hello")],
    )
    token = share(client, source)["token"]
    # An edit is a fork of its own, and so is a fork: the shared rows never change.
    edited = client.post(
        f"/api/conversations/{source.pk}/edit/",
        {"message_id": message_id(source, 0), "message": SECRET, "background": False},
        format="json",
    )
    assert edited.status_code == 201, edited.json()
    forked = client.post(f"/api/conversations/{source.pk}/fork/", {}, format="json")
    assert forked.status_code == 201, forked.json()
    assert shared_texts(anonymous, token) == ["Hello", "Hello"]
    assert SECRET not in page_html(token)
    # The fork has no links of its own: the source's never show its rows.
    assert not ShareLink.objects.filter(conversation_id=forked.json()["id"]).exists()


# Hidden turns --------------------------------------------------------------------


@pytest.fixture
def with_aside(user: User) -> Conversation:
    """A question, a tool round, an aside and its answer, a last question."""
    return create_conversation(
        owner=user,
        title="Aside",
        messages=[
            ChatMessage.user("What time is it?"),
            ChatMessage.assistant_tool_calls([ToolCall("t1", "get_time", {})]),
            ChatMessage.tool_result("t1", "09:00"),
            ChatMessage.assistant("Nine."),
            ChatMessage.user("An aside to hide."),
            ChatMessage.assistant("Noted."),
            ChatMessage.user("Thanks."),
        ],
    )


def hide(client: APIClient, conversation: Conversation, position: int, reason: str) -> None:
    url = f"/api/conversations/{conversation.pk}/messages/{message_id(conversation, position)}/"
    response = client.post(f"{url}hide/", {"reason": reason}, format="json")
    assert response.status_code == 200, response.json()


def unhide(client: APIClient, conversation: Conversation, position: int) -> None:
    url = f"/api/conversations/{conversation.pk}/messages/{message_id(conversation, position)}/"
    assert client.post(f"{url}unhide/").status_code == 200


def assert_no_hidden_turn(reader: APIClient, token: str) -> None:
    body = shared(reader, token)
    assert [m["content"] for m in body["messages"]] == ["What time is it?", "Nine.", "Noted."]
    # Numbered within the snapshot: no gap tells a reader something was withdrawn.
    assert [m["position"] for m in body["messages"]] == [0, 1, 2]
    for message in body["messages"]:
        assert not {"hidden_at", "hidden_reason"} & set(message)
    for text in HIDDEN_TEXTS:
        assert text not in str(body)
        assert text not in page_html(token)


def test_hidden_turns_and_their_reasons_never_reach_a_reader(
    client: APIClient,
    anonymous: APIClient,
    other: APIClient,
    other_user: User,
    with_aside: Conversation,
) -> None:
    # Hidden before the link (the tool group, whole) and after it (the aside).
    hide(client, with_aside, 2, REASON)
    token = share(client, with_aside, message_id=message_id(with_aside, 5))["token"]
    hide(client, with_aside, 4, REASON)
    assert_no_hidden_turn(anonymous, token)
    copy = copied(other, token)
    assert copy.owner == other_user
    turns = load_messages(copy)
    assert [m.content for m in turns] == ["What time is it?", "Nine.", "Noted."]
    check_sequence(turns, pending=())
    rows = Message.objects.filter(conversation=copy)
    assert not rows.filter(hidden_at__isnull=False).exists()
    assert not rows.exclude(hidden_reason="").exists()
    assert [m.position for m in rows.order_by("position")] == [0, 1, 2]
    listed = client.get(shares_url(with_aside)).json()
    assert listed[0]["message_count"] == 3


def test_a_turn_hidden_when_the_link_was_made_stays_out_once_shown_again(
    client: APIClient, anonymous: APIClient, with_aside: Conversation
) -> None:
    hide(client, with_aside, 2, REASON)
    hide(client, with_aside, 4, REASON)
    token = share(client, with_aside, message_id=message_id(with_aside, 5))["token"]
    unhide(client, with_aside, 2)
    unhide(client, with_aside, 4)
    assert_no_hidden_turn(anonymous, token)


def test_a_turn_hidden_after_the_link_comes_back_when_shown_again(
    client: APIClient, anonymous: APIClient, with_aside: Conversation
) -> None:
    token = share(client, with_aside, message_id=message_id(with_aside, 5))["token"]
    hide(client, with_aside, 4, REASON)
    assert "An aside to hide." not in shared_texts(anonymous, token)
    unhide(client, with_aside, 4)
    assert "An aside to hide." in shared_texts(anonymous, token)


def test_an_attachment_of_a_hidden_turn_is_not_served(
    client: APIClient, anonymous: APIClient, other: APIClient, user: User
) -> None:
    turn, image = picture_turn(user, "Look")
    pictured = create_conversation(
        owner=user, messages=[ChatMessage.user("Hi"), turn, ChatMessage.assistant("Nice.")]
    )
    token = share(client, pictured)["token"]
    assert anonymous.get(f"/api/shared/{token}/attachments/{image.pk}/content/").status_code == 200
    hide(client, pictured, 1, REASON)
    response = anonymous.get(f"/api/shared/{token}/attachments/{image.pk}/content/")
    assert (response.status_code, error_code(response)) == (404, "not_found")
    assert Client().get(f"/shared/{token}/attachments/{image.pk}/").status_code == 404
    copy = copied(other, token)
    assert [m.content for m in load_messages(copy)] == ["Hi", "Nice."]
    assert not copy.messages.filter(attachments__isnull=False).exists()


def test_a_conversation_with_nothing_shown_has_nothing_to_share(
    client: APIClient, user: User
) -> None:
    quiet = create_conversation(owner=user, messages=[ChatMessage.user("Only this.")])
    hide(client, quiet, 0, REASON)
    response = client.post(shares_url(quiet), {}, format="json")
    assert (response.status_code, error_code(response)) == (400, "empty_conversation")
    assert not ShareLink.objects.exists()


def test_listing_links_costs_the_same_queries_for_any_number(
    client: APIClient, with_aside: Conversation, django_assert_max_num_queries: Any
) -> None:
    for _ in range(5):
        create_share(with_aside)
    # The conversation, then the links with their conversation and shown counts.
    with django_assert_max_num_queries(2):
        listed = client.get(shares_url(with_aside)).json()
    assert [link["message_count"] for link in listed] == [7] * 5


# The trash -----------------------------------------------------------------------


def test_a_trashed_conversations_links_are_404_until_it_is_restored(
    client: APIClient, anonymous: APIClient, other: APIClient, user: User
) -> None:
    trip, image = with_image(user, "Trip")
    made = share(client, trip)
    token = made["token"]
    assert client.delete(f"/api/conversations/{trip.pk}/").status_code == 204
    for response in (
        anonymous.get(f"/api/shared/{token}/"),
        anonymous.get(f"/api/shared/{token}/attachments/{image.pk}/content/"),
        other.post(f"/api/shared/{token}/fork/"),
    ):
        assert (response.status_code, error_code(response)) == (404, "share_not_found")
    for path in (f"/shared/{token}/", f"/shared/{token}/attachments/{image.pk}/"):
        assert Client().get(path).status_code == 404
    assert Conversation.objects.count() == 1
    # No new link either; the owner still sees (and may revoke) the old one.
    refused = client.post(shares_url(trip), {}, format="json")
    assert (refused.status_code, error_code(refused)) == (409, "conversation_trashed")
    assert ShareLink.objects.count() == 1
    listed = client.get(shares_url(trip)).json()
    assert [(link["id"], link["is_active"]) for link in listed] == [(made["id"], False)]
    # Restored, the link works again.
    assert client.post(f"/api/conversations/{trip.pk}/restore/").status_code == 200
    assert [m["role"] for m in shared(anonymous, token)["messages"]] == ["user", "assistant"]
    assert anonymous.get(f"/api/shared/{token}/attachments/{image.pk}/content/").status_code == 200
    assert client.get(shares_url(trip)).json()[0]["is_active"] is True


def test_create_share_refuses_a_trashed_conversation(user: User) -> None:
    from llm_conversations.conversations.lifecycle import trash_conversation
    from llm_conversations.exceptions import ConversationTrashed

    trip = create_conversation(owner=user, messages=[ChatMessage.user("Hi")])
    trash_conversation(trip)
    trip.refresh_from_db()
    with pytest.raises(ConversationTrashed):
        create_share(trip)
    assert not ShareLink.objects.exists()


# Caching and where the link points -----------------------------------------------


def assert_not_stored(response: Any) -> None:
    directives = {part.strip() for part in response["Cache-Control"].split(",")}
    assert {"private", "no-store"} <= directives, response["Cache-Control"]


def test_shared_answers_are_never_kept_by_a_cache(
    client: APIClient, anonymous: APIClient, other: APIClient, user: User
) -> None:
    pictured, image = with_image(user, "Kept")
    token = share(client, pictured)["token"]
    browser = Client()
    browser.force_login(User.objects.get(username="mallory"))
    page = browser.get(f"/shared/{token}/")
    csrf = page.cookies["csrftoken"].value
    for response in (
        anonymous.get(f"/api/shared/{token}/"),
        anonymous.get(f"/api/shared/{token}/attachments/{image.pk}/content/"),
        other.post(f"/api/shared/{token}/fork/"),
        anonymous.get("/api/shared/not-a-token/"),
        page,
        browser.get(f"/shared/{token}/attachments/{image.pk}/"),
        browser.post(f"/shared/{token}/fork/", {"csrfmiddlewaretoken": csrf}),
    ):
        assert response.status_code in (200, 201, 404), response.status_code
        assert_not_stored(response)


def test_a_new_links_url_is_its_page_with_the_api_url_beside_it(
    client: APIClient, anonymous: APIClient, conversation: Conversation
) -> None:
    made = share(client, conversation)
    token = made["token"]
    assert made["url"] == f"http://testserver/shared/{token}/"
    assert made["api_url"] == f"http://testserver/api/shared/{token}/"
    assert Client().get(made["url"].removeprefix("http://testserver")).status_code == 200
    assert anonymous.get(made["api_url"]).status_code == 200


def test_without_the_pages_mounted_a_new_link_has_no_page_url(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    settings.ROOT_URLCONF = "tests.api.urls_without_pages"
    made = share(client, conversation)
    assert made["url"] is None
    assert made["api_url"].endswith(f"/api/shared/{made['token']}/")
