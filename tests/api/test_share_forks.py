"""Continuing a share link as a fork when the snapshot changes under it, and what a
copy costs."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation, shares
from llm_conversations.conversations.lifecycle import hide_message, unhide_message
from llm_conversations.conversations.shares import create_share
from llm_conversations.core.messages import ChatMessage
from llm_conversations.models import Attachment, Conversation, Message
from tests.api.test_shares import error_code, picture_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_cache", "media_root")]


@pytest.fixture
def shown_again(user: User, monkeypatch: pytest.MonkeyPatch) -> str:
    """The token of a link to two turns with an image each, the second hidden; the
    owner shows it again while the next reader's copy of the first image is written."""
    pictured = create_conversation(
        owner=user,
        messages=[picture_turn(user, "Shown")[0], picture_turn(user, "Withdrawn")[0]],
    )
    second = Message.objects.get(conversation=pictured, position=1)
    token = create_share(pictured).token
    hide_message(pictured, second)
    copy_attachment = shares._copy_attachment

    def owner_shows_it_again(attachment: Attachment, owner: User) -> Attachment:
        unhide_message(pictured, second)
        monkeypatch.setattr(shares, "_copy_attachment", copy_attachment)  # once
        return copy_attachment(attachment, owner)

    monkeypatch.setattr(shares, "_copy_attachment", owner_shows_it_again)
    return token


def test_a_turn_shown_again_while_it_is_copied_refuses_the_copy(
    other: APIClient, other_user: User, shown_again: str
) -> None:
    response = other.post(f"/api/shared/{shown_again}/fork/")
    assert (response.status_code, error_code(response)) == (409, "snapshot_changed")
    assert not Conversation.objects.filter(owner=other_user).exists()
    # Copied again, the copy shows both turns, each with the reader's own image.
    copied = other.post(f"/api/shared/{shown_again}/fork/")
    assert copied.status_code == 201, copied.json()
    parts = Message.objects.filter(conversation_id=copied.json()["id"]).values_list(
        "content_parts", flat=True
    )
    theirs = Attachment.objects.filter(owner=other_user).values_list("pk", flat=True)
    assert sorted(part[1]["attachment_id"] for part in parts) == sorted(map(str, theirs))
    assert len(parts) == 2


def test_the_page_says_so_when_the_snapshot_changed_while_it_was_copied(
    other_user: User, shown_again: str
) -> None:
    browser = Client()
    browser.force_login(other_user)
    page = browser.post(f"/shared/{shown_again}/fork/")
    assert page.status_code == 409
    assert "fork it again" in page.content.decode()
    assert not Conversation.objects.filter(owner=other_user).exists()


@pytest.mark.parametrize("count", [4, 40])
def test_a_fork_costs_the_same_statements_at_any_length(
    other: APIClient, user: User, count: int, django_assert_num_queries: Any
) -> None:
    conversation = create_conversation(
        owner=user, messages=[ChatMessage.user(f"Message {n}") for n in range(count)]
    )
    for message in Message.objects.filter(
        conversation=conversation, position__in=range(1, count, 4)
    ):
        hide_message(conversation, message)
    token = create_share(conversation).token
    # The link; the snapshot's attachments; in a transaction (a savepoint and its
    # release here): the new conversation, its copied rows, their tail, their count,
    # their attachment index, their private columns and their parts.
    with django_assert_num_queries(11):
        response = other.post(f"/api/shared/{token}/fork/")
    assert response.status_code == 201, response.json()
    assert response.json()["message_count"] == count - len(range(1, count, 4))
