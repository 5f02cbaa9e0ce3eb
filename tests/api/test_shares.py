"""Share links through the API and the page: the owner's links, what a reader sees of a
snapshot (nothing beyond it), its attachments, revoking and expiry, and copies."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from llm_conversations.api.representations import MESSAGE_COLUMNS, shared_message_data
from llm_conversations.api.serializers.shares import SharedMessageSerializer
from llm_conversations.conversations import append_messages, create_conversation, load_messages
from llm_conversations.conversations.attachments import create_attachment
from llm_conversations.conversations.lifecycle import hide_message
from llm_conversations.conversations.retention import delete_user_data
from llm_conversations.conversations.shares import create_share
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import (
    Attachment,
    Conversation,
    IdempotencyKey,
    Message,
    MessageAttachment,
    ShareLink,
)
from tests.api.conftest import API_SETTINGS
from tests.support.attachment_files import image_bytes, pdf_bytes

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_cache", "media_root")]

HIDDEN = {"run", "usage", "cost", "feedback", "hidden_at", "hidden_reason"}


@pytest.fixture
def trip(user: User) -> Conversation:
    """A conversation with a tool round: user, call, result, answer."""
    return create_conversation(
        owner=user,
        title="Trip",
        metadata={"crm_id": "private-42"},
        messages=[
            ChatMessage.user("Weather in Oslo?"),
            ChatMessage.assistant_tool_calls([ToolCall("c1", "get_weather", {"city": "Oslo"})]),
            ChatMessage.tool_result("c1", "rain"),
            ChatMessage.assistant("Rain in Oslo."),
        ],
    )


def shares_url(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/shares/"


def share(client: APIClient, conversation: Conversation, **body: Any) -> dict[str, Any]:
    response = client.post(shares_url(conversation), body, format="json")
    assert response.status_code == 201, response.json()
    data: dict[str, Any] = response.json()
    return data


def message_id(conversation: Conversation, position: int) -> str:
    return str(Message.objects.get(conversation=conversation, position=position).pk)


def error_code(response: Any) -> str:
    code: str = response.json()["error"]["code"]
    return code


# The owner's links ---------------------------------------------------------------


def test_a_new_link_shows_its_token_once_and_the_database_keeps_only_its_hash(
    client: APIClient, trip: Conversation
) -> None:
    made = share(client, trip)
    token = made["token"]
    assert len(token) >= 43
    assert made["url"] == f"http://testserver/shared/{token}/"
    assert made["api_url"] == f"http://testserver/api/shared/{token}/"
    assert made["up_to_position"] == 3
    assert made["message_count"] == 4
    assert made["is_active"] is True
    assert (made["expires_at"], made["revoked_at"]) == (None, None)
    link = ShareLink.objects.get()
    assert link.token_hash == hashlib.sha256(token.encode()).hexdigest()
    # No column of any link, nor any kept answer, holds the token.
    assert token not in repr(list(ShareLink.objects.values()))
    assert token not in repr(list(IdempotencyKey.objects.values()))
    listed = client.get(shares_url(trip)).json()
    assert [item["id"] for item in listed] == [made["id"]]
    assert "token" not in listed[0]
    assert not {"url", "api_url"} & set(listed[0])
    detail = client.get(f"{shares_url(trip)}{made['id']}/").json()
    assert "token" not in detail


def test_a_link_through_a_message_and_with_an_expiry(client: APIClient, trip: Conversation) -> None:
    expires = timezone.now() + timedelta(days=2)
    made = share(client, trip, message_id=message_id(trip, 0), expires_at=expires.isoformat())
    assert made["up_to_position"] == 0
    link = ShareLink.objects.get()
    assert link.expires_at == expires


@pytest.mark.parametrize(
    ("body", "code"),
    [
        # Between the call turn and its result: refused, never moved.
        ({"message_id": "call"}, "inside_tool_group"),
        ({"message_id": "6f1c1f8e-1d0a-4c53-9a57-0f8a3c1de0b7"}, "unknown_message"),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "invalid_expiry"),
        ({"message_id": 3}, "invalid"),
        ({"token": "mine"}, "unknown_field"),
    ],
)
def test_a_link_that_breaks_a_rule_is_400_and_nothing_is_stored(
    client: APIClient, trip: Conversation, body: dict[str, Any], code: str
) -> None:
    if body.get("message_id") == "call":
        body = {"message_id": message_id(trip, 1)}
    response = client.post(shares_url(trip), body, format="json")
    assert (response.status_code, error_code(response)) == (400, code), response.json()
    assert not ShareLink.objects.exists()


def test_an_empty_conversation_has_nothing_to_share(client: APIClient, user: User) -> None:
    empty = create_conversation(owner=user)
    response = client.post(shares_url(empty), {}, format="json")
    assert (response.status_code, error_code(response)) == (400, "empty_conversation")


def test_another_users_links_and_conversations_do_not_exist(
    client: APIClient, other: APIClient, trip: Conversation
) -> None:
    made = share(client, trip)
    detail = f"{shares_url(trip)}{made['id']}/"
    for response in (
        other.get(shares_url(trip)),
        other.post(shares_url(trip), {}, format="json"),
        other.get(detail),
        other.post(f"{detail}revoke/"),
    ):
        assert (response.status_code, error_code(response)) == (404, "not_found")
    assert ShareLink.objects.get().revoked_at is None
    assert ShareLink.objects.count() == 1


def test_a_link_of_another_conversation_is_not_found_under_this_one(
    client: APIClient, trip: Conversation, user: User
) -> None:
    made = share(client, trip)
    mine_too = create_conversation(owner=user, messages=[ChatMessage.user("Hi")])
    response = client.get(f"{shares_url(mine_too)}{made['id']}/")
    assert response.status_code == 404


def test_anonymous_callers_manage_no_links(anonymous: APIClient, trip: Conversation) -> None:
    assert anonymous.get(shares_url(trip)).status_code in (401, 403)
    assert anonymous.post(shares_url(trip), {}, format="json").status_code in (401, 403)


# Reading a snapshot --------------------------------------------------------------


def test_a_reader_sees_the_snapshot_and_nothing_after_it(
    client: APIClient, anonymous: APIClient, trip: Conversation
) -> None:
    made = share(client, trip, message_id=message_id(trip, 2))
    append_messages(trip, [ChatMessage.user("And tomorrow?")])
    Message.objects.filter(conversation=trip).update(metadata={"note": "owner only"})
    Message.objects.filter(conversation=trip, role="assistant").update(
        cost=Decimal("0.25"), input_tokens=7, output_tokens=3
    )
    response = anonymous.get(f"/api/shared/{made['token']}/")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert set(body) == {"title", "shared_at", "expires_at", "messages"}
    assert body["title"] == "Trip"
    assert [m["position"] for m in body["messages"]] == [0, 1, 2]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool"]
    assert body["messages"][1]["tool_calls"][0]["function"]["name"] == "get_weather"
    for message in body["messages"]:
        assert not HIDDEN & set(message)
    text = response.content.decode()
    for private in ("Rain in Oslo.", "And tomorrow?", "owner only", "private-42", str(trip.pk)):
        assert private not in text


def test_the_link_made_without_a_message_ends_at_the_last_one_then(
    client: APIClient, anonymous: APIClient, trip: Conversation
) -> None:
    made = share(client, trip)
    append_messages(trip, [ChatMessage.user("Later")])
    messages = anonymous.get(f"/api/shared/{made['token']}/").json()["messages"]
    assert [m["content"] for m in messages][-1] == "Rain in Oslo."
    assert len(messages) == 4


def test_a_shared_message_is_a_message_without_the_hidden_fields() -> None:
    row = {column: None for column in MESSAGE_COLUMNS}
    row.update(role="user", content="Hi", is_error=False, position=0)
    # tool_calls and tool_call_id are set on turns that have them only.
    shown = set(shared_message_data(row, 0)) | {"tool_calls", "tool_call_id"}
    assert shown == set(SharedMessageSerializer().fields)
    assert set(SharedMessageSerializer().fields) | HIDDEN == set(
        SharedMessageSerializer.__mro__[1]().fields
    )


@pytest.mark.parametrize("count", [4, 40])
def test_reading_a_snapshot_costs_two_queries_at_any_length(
    client: APIClient,
    anonymous: APIClient,
    user: User,
    count: int,
    django_assert_num_queries: Any,
) -> None:
    conversation = create_conversation(
        owner=user, messages=[ChatMessage.user(f"Message {n}") for n in range(count)]
    )
    token = share(client, conversation)["token"]
    # Half of them hidden since: left out by the same query.
    for message in Message.objects.filter(
        conversation=conversation, position__in=range(0, count, 2)
    ):
        hide_message(conversation, message)
    # The link with its conversation, then the snapshot's messages.
    with django_assert_num_queries(2):
        response = anonymous.get(f"/api/shared/{token}/")
    assert len(response.json()["messages"]) == count // 2
    with django_assert_num_queries(2):
        assert Client().get(f"/shared/{token}/").status_code == 200


def test_revoking_a_link_stops_it_at_once(
    client: APIClient, anonymous: APIClient, trip: Conversation
) -> None:
    made = share(client, trip)
    url = f"/api/shared/{made['token']}/"
    assert anonymous.get(url).status_code == 200
    revoked = client.post(f"{shares_url(trip)}{made['id']}/revoke/")
    assert revoked.status_code == 200
    assert revoked.json()["is_active"] is False
    first = revoked.json()["revoked_at"]
    assert first is not None
    # Again: nothing changes.
    assert client.post(f"{shares_url(trip)}{made['id']}/revoke/").json()["revoked_at"] == first
    response = anonymous.get(url)
    assert (response.status_code, error_code(response)) == (404, "share_not_found")


def test_an_expired_or_unknown_link_is_share_not_found(
    client: APIClient, anonymous: APIClient, trip: Conversation
) -> None:
    made = share(client, trip, expires_at=(timezone.now() + timedelta(hours=1)).isoformat())
    past = timezone.now() - timedelta(minutes=1)
    ShareLink.objects.update(created_at=past - timedelta(hours=1), expires_at=past)
    for token in (made["token"], "nope", "x" * 500, made["token"][:-1]):
        response = anonymous.get(f"/api/shared/{token}/")
        assert (response.status_code, error_code(response)) == (404, "share_not_found")
    assert client.get(shares_url(trip)).json()[0]["is_active"] is False


def test_only_signed_in_readers_with_share_links_require_login(
    settings: Any, client: APIClient, anonymous: APIClient, other: APIClient, trip: Conversation
) -> None:
    token = share(client, trip)["token"]
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "SHARE_LINKS_REQUIRE_LOGIN": True}
    response = anonymous.get(f"/api/shared/{token}/")
    assert (response.status_code, error_code(response)) == (403, "not_authenticated")
    assert other.get(f"/api/shared/{token}/").status_code == 200


def test_reads_over_share_rate_are_throttled(
    settings: Any, client: APIClient, anonymous: APIClient, trip: Conversation
) -> None:
    token = share(client, trip)["token"]
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "SHARE_RATE": "2/min"}
    assert [anonymous.get(f"/api/shared/{token}/").status_code for _ in range(3)] == [
        200,
        200,
        429,
    ]


# Attachments ---------------------------------------------------------------------


def picture_turn(owner: User, text: str) -> tuple[dict[str, Any], Attachment]:
    """A user turn of ``text`` and an image of the owner's, and that image."""
    # A size of its own: the same bytes would be the same attachment.
    side = 4 + len(text)
    attachment, _ = create_attachment(
        owner, image_bytes("PNG", (side, side)), filename=f"{text}.png"
    )
    parts = [
        {"type": "text", "text": text},
        {"type": "image", "attachment_id": str(attachment.pk)},
    ]
    return {"role": "user", "content": parts}, attachment


def with_image(owner: User, text: str) -> tuple[Conversation, Attachment]:
    turn, attachment = picture_turn(owner, text)
    conversation = create_conversation(
        owner=owner, title=text, messages=[turn, ChatMessage.assistant("A picture.")]
    )
    return conversation, attachment


def test_a_reader_downloads_only_the_attachments_the_snapshot_shows(
    client: APIClient, anonymous: APIClient, user: User
) -> None:
    shown, image = with_image(user, "shown")
    token = share(client, shown)["token"]
    # The owner's other attachments: of another conversation, and after the snapshot.
    _, elsewhere = with_image(user, "elsewhere")
    later, _ = create_attachment(user, pdf_bytes(), filename="later.pdf")
    append_messages(
        shown,
        [{"role": "user", "content": [{"type": "file", "attachment_id": str(later.pk)}]}],
    )
    content = anonymous.get(f"/api/shared/{token}/attachments/{image.pk}/content/")
    assert content.status_code == 200
    assert b"".join(content.streaming_content) == image.file.open("rb").read()
    for attachment_id in (elsewhere.pk, later.pk, "not-a-uuid"):
        response = anonymous.get(f"/api/shared/{token}/attachments/{attachment_id}/content/")
        assert (response.status_code, error_code(response)) == (404, "not_found")
    ShareLink.objects.update(revoked_at=timezone.now())
    response = anonymous.get(f"/api/shared/{token}/attachments/{image.pk}/content/")
    assert (response.status_code, error_code(response)) == (404, "share_not_found")


# Continuing as a fork ------------------------------------------------------------


def test_a_fork_is_the_readers_own_with_exactly_the_snapshots_turns(
    client: APIClient, other: APIClient, other_user: User, trip: Conversation
) -> None:
    token = share(client, trip, message_id=message_id(trip, 2))["token"]
    # Through the answer now: the answer stays out of the copy.
    Message.objects.filter(conversation=trip).update(metadata={"note": "owner only"})
    Message.objects.filter(conversation=trip, role="assistant").update(
        cost=Decimal("0.25"), input_tokens=7
    )
    response = other.post(f"/api/shared/{token}/fork/")
    assert response.status_code == 201, response.json()
    body = response.json()
    copy = Conversation.objects.get(pk=body["id"])
    assert copy.owner == other_user
    assert (body["title"], body["message_count"], body["forked_from"]) == ("Trip", 3, None)
    assert body["forked_at_position"] is None
    assert copy.metadata == {}
    turns = load_messages(copy)
    assert turns == load_messages(trip)[:3]
    check_sequence(turns, pending=())
    copied = Message.objects.filter(conversation=copy)
    assert not copied.exclude(metadata={}).exists()
    assert not copied.filter(cost__isnull=False).exists()
    assert not copied.filter(input_tokens__isnull=False).exists()
    # The copy goes on in the reader's conversations; the source never changes.
    listed = other.get("/api/conversations/").json()["results"]
    assert [item["id"] for item in listed] == [body["id"]]
    answer = other.post(
        f"/api/conversations/{copy.pk}/messages/",
        {"role": "assistant", "content": "Rain, then sun."},
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    assert Message.objects.filter(conversation=trip).count() == 4
    assert Conversation.objects.get(pk=trip.pk).metadata == {"crm_id": "private-42"}


def test_a_fork_shows_the_readers_own_copies_of_the_attachments(
    client: APIClient, other: APIClient, other_user: User, user: User
) -> None:
    shown, image = with_image(user, "shown")
    token = share(client, shown)["token"]
    body = other.post(f"/api/shared/{token}/fork/").json()
    theirs = Attachment.objects.get(owner=other_user)
    assert theirs.pk != image.pk
    assert theirs.sha256 == image.sha256
    first = Message.objects.get(conversation_id=body["id"], position=0)
    assert first.content_parts == [
        {"type": "text", "text": "shown"},
        {"type": "image", "attachment_id": str(theirs.pk)},
    ]
    links = MessageAttachment.objects.filter(message__conversation_id=body["id"])
    assert list(links.values_list("attachment_id", flat=True)) == [theirs.pk]
    assert other.get(f"/api/attachments/{theirs.pk}/content/").status_code == 200
    # A second copy reuses the reader's attachment.
    assert other.post(f"/api/shared/{token}/fork/").status_code == 201
    assert Attachment.objects.filter(owner=other_user).count() == 1


def test_the_owner_continuing_their_own_link_gets_a_fork(
    client: APIClient, trip: Conversation
) -> None:
    token = share(client, trip)["token"]
    body = client.post(f"/api/shared/{token}/fork/").json()
    assert (body["forked_from"], body["forked_at_position"]) == (str(trip.pk), 4)


def test_only_signed_in_readers_fork_and_only_through_a_usable_link(
    client: APIClient, anonymous: APIClient, other: APIClient, trip: Conversation
) -> None:
    made = share(client, trip)
    response = anonymous.post(f"/api/shared/{made['token']}/fork/")
    assert (response.status_code, error_code(response)) == (403, "not_authenticated")
    client.post(f"{shares_url(trip)}{made['id']}/revoke/")
    response = other.post(f"/api/shared/{made['token']}/fork/")
    assert (response.status_code, error_code(response)) == (404, "share_not_found")
    assert Conversation.objects.count() == 1


# The page ------------------------------------------------------------------------


def test_the_page_shows_the_snapshot_escaped(
    client: APIClient, user: User, django_assert_num_queries: Any
) -> None:
    hostile = create_conversation(
        owner=user,
        title="<b>Title</b>",
        messages=[
            ChatMessage.user("<script>alert('x')</script>"),
            ChatMessage.assistant("Fine & <i>dandy</i>"),
        ],
    )
    token = share(client, hostile, message_id=message_id(hostile, 0))["token"]
    # The link with its conversation, then the snapshot's messages.
    with django_assert_num_queries(2):
        page = Client().get(f"/shared/{token}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "<script>" not in html
    assert "&lt;b&gt;Title&lt;/b&gt;" in html
    assert "dandy" not in html  # after the snapshot
    assert "Continue as a fork" not in html


def test_a_signed_in_reader_continues_the_page_as_a_fork(
    client: APIClient, other_user: User, trip: Conversation
) -> None:
    token = share(client, trip)["token"]
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(other_user)
    page = browser.get(f"/shared/{token}/")
    assert "Continue as a fork" in page.content.decode()
    csrf = page.cookies["csrftoken"].value
    copied = browser.post(f"/shared/{token}/fork/", {"csrfmiddlewaretoken": csrf})
    assert copied.status_code == 201
    copy = Conversation.objects.get(owner=other_user)
    assert str(copy.pk) in copied.content.decode()
    assert copy.message_count == 4
    # Without the CSRF token: refused.
    assert browser.post(f"/shared/{token}/fork/").status_code == 403


def test_the_page_of_a_revoked_link_is_404_and_login_may_be_required(
    settings: Any, client: APIClient, trip: Conversation
) -> None:
    made = share(client, trip)
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "SHARE_LINKS_REQUIRE_LOGIN": True}
    page = Client().get(f"/shared/{made['token']}/")
    assert page.status_code == 302
    assert "login" in page["Location"]
    settings.LLM_CONVERSATIONS = API_SETTINGS
    client.post(f"{shares_url(trip)}{made['id']}/revoke/")
    assert Client().get(f"/shared/{made['token']}/").status_code == 404


def test_the_page_serves_only_the_snapshots_attachments(client: APIClient, user: User) -> None:
    shown, image = with_image(user, "shown")
    _, elsewhere = with_image(user, "elsewhere")
    token = share(client, shown)["token"]
    html = Client().get(f"/shared/{token}/").content.decode()
    assert f"/shared/{token}/attachments/{image.pk}/" in html
    assert Client().get(f"/shared/{token}/attachments/{image.pk}/").status_code == 200
    assert Client().get(f"/shared/{token}/attachments/{elsewhere.pk}/").status_code == 404


# The admin -----------------------------------------------------------------------


def test_the_admin_lists_links_by_the_start_of_their_hash_and_revokes_them(
    client: APIClient, trip: Conversation
) -> None:
    share(client, trip)
    link = ShareLink.objects.get()
    staff = User.objects.create_superuser("root", password="root-pw")
    browser = Client()
    browser.force_login(staff)
    listed = browser.get("/admin/llm_conversations/sharelink/")
    assert listed.status_code == 200
    html = listed.content.decode()
    assert link.token_hash[:12] in html
    assert link.token_hash not in html
    assert (
        link.token_hash
        not in browser.get(f"/admin/llm_conversations/sharelink/{link.pk}/change/").content.decode()
    )
    done = browser.post(
        "/admin/llm_conversations/sharelink/",
        {"action": "revoke_links", "_selected_action": [str(link.pk)]},
    )
    assert done.status_code == 302
    link.refresh_from_db()
    assert link.revoked_at is not None


def test_the_database_refuses_an_expiry_before_creation_too(trip: Conversation) -> None:
    made = create_share(trip)
    with (
        pytest.raises(IntegrityError, match="llmconv_share_expires_after_created"),
        transaction.atomic(),
    ):
        ShareLink.objects.filter(pk=made.link.pk).update(
            expires_at=made.link.created_at - timedelta(seconds=1)
        )


def test_a_fork_outlives_the_owners_data(
    client: APIClient, other: APIClient, other_user: User, user: User
) -> None:
    shown, _ = with_image(user, "shown")
    token = share(client, shown)["token"]
    copy = other.post(f"/api/shared/{token}/fork/").json()
    # Nothing of the owner's is shown by the copy, so all of it can go.
    delete_user_data(user)
    assert not ShareLink.objects.exists()
    assert not Attachment.objects.filter(owner=user).exists()
    assert len(load_messages(copy["id"])) == 2
    theirs = Attachment.objects.get(owner=other_user)
    assert other.get(f"/api/attachments/{theirs.pk}/content/").status_code == 200
