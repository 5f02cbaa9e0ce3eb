"""Continuing a share link as a copy when the snapshot changes under it, and what a
copy costs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation, sharing
from llm_conversations.conversations.attachments import create_attachment
from llm_conversations.conversations.lifecycle import hide_message, unhide_message
from llm_conversations.conversations.sharing import create_share
from llm_conversations.core.messages import ChatMessage
from llm_conversations.models import Attachment, Conversation, Message
from tests.api.test_shares import error_code
from tests.support.attachment_files import image_bytes

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_cache")]


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


@pytest.fixture
def other(other_user: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(other_user)
    return api


def picture_turn(owner: User, text: str, side: int) -> dict[str, Any]:
    attachment, _ = create_attachment(owner, image_bytes("PNG", (side, side)))
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": text},
            {"type": "image", "attachment_id": str(attachment.pk)},
        ],
    }


def test_a_turn_shown_again_while_it_is_copied_refuses_the_copy(
    other: APIClient, other_user: User, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    pictured = create_conversation(
        owner=user,
        messages=[picture_turn(user, "Shown", 7), picture_turn(user, "Withdrawn", 8)],
    )
    withdrawn = Message.objects.get(conversation=pictured, position=1)
    token = create_share(pictured).token
    hide_message(pictured, withdrawn)
    copy_attachment = sharing._copy_attachment

    def owner_shows_it_again(attachment: Attachment, owner: User) -> Attachment:
        # The owner acts while the reader's copy of the files is being written.
        unhide_message(pictured, withdrawn)
        return copy_attachment(attachment, owner)

    monkeypatch.setattr(sharing, "_copy_attachment", owner_shows_it_again)
    response = other.post(f"/api/shared/{token}/copy/")
    assert (response.status_code, error_code(response)) == (409, "snapshot_changed")
    assert not Conversation.objects.filter(owner=other_user).exists()
    # Copied again, the copy shows both turns, each with the reader's own image.
    monkeypatch.setattr(sharing, "_copy_attachment", copy_attachment)
    copied = other.post(f"/api/shared/{token}/copy/")
    assert copied.status_code == 201, copied.json()
    parts = Message.objects.filter(conversation_id=copied.json()["id"]).values_list(
        "content_parts", flat=True
    )
    theirs = {
        str(pk) for pk in Attachment.objects.filter(owner=other_user).values_list("pk", flat=True)
    }
    assert {part[1]["attachment_id"] for part in parts} <= theirs
    assert len(parts) == 2


@pytest.mark.parametrize("count", [4, 40])
def test_a_copy_costs_the_same_statements_at_any_length(
    other: APIClient,
    user: User,
    count: int,
    django_assert_num_queries: Any,
) -> None:
    conversation = create_conversation(
        owner=user, messages=[ChatMessage.user(f"Message {n}") for n in range(count)]
    )
    for position in range(1, count, 4):
        hide_message(
            conversation, Message.objects.get(conversation=conversation, position=position)
        )
    token = create_share(conversation).token
    # The link; the snapshot's attachments; in a transaction (a savepoint and its
    # release here): the new conversation, its copied rows, their tail, their count,
    # their attachment index, their private columns and their parts.
    with django_assert_num_queries(11):
        response = other.post(f"/api/shared/{token}/copy/")
    assert response.status_code == 201, response.json()
    assert response.json()["message_count"] == count - len(range(1, count, 4))


def test_the_page_says_so_when_the_snapshot_changed_while_it_was_copied(
    other_user: User, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    pictured = create_conversation(
        owner=user,
        messages=[picture_turn(user, "Shown", 9), picture_turn(user, "Withdrawn", 10)],
    )
    withdrawn = Message.objects.get(conversation=pictured, position=1)
    token = create_share(pictured).token
    hide_message(pictured, withdrawn)
    copy_attachment = sharing._copy_attachment

    def owner_shows_it_again(attachment: Attachment, owner: User) -> Attachment:
        unhide_message(pictured, withdrawn)
        return copy_attachment(attachment, owner)

    monkeypatch.setattr(sharing, "_copy_attachment", owner_shows_it_again)
    browser = Client()
    browser.force_login(other_user)
    page = browser.post(f"/shared/{token}/copy/")
    assert page.status_code == 409
    assert "copy it again" in page.content.decode()
    assert not Conversation.objects.filter(owner=other_user).exists()
