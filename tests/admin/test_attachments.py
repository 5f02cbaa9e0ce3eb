"""Attachments in the admin: thumbnails and file links in the transcript, bytes for staff."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from llm_conversations.conversations import append_messages, create_conversation
from llm_conversations.conversations.attachments import create_attachment
from llm_conversations.core.messages import ChatMessage, ImagePart, TextPart, ToolCall
from llm_conversations.models import Attachment, Conversation
from tests.support.attachment_files import image_bytes, pdf_bytes

from .test_admin import CHANGE_PAGE_QUERIES, change_url

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


@pytest.fixture
def staff_client() -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def content_url(attachment: Attachment) -> str:
    return reverse("admin:llm_conversations_attachment_content", args=[attachment.pk])


@pytest.fixture
def conversation() -> tuple[Conversation, Attachment, Attachment, Attachment]:
    owner = get_user_model().objects.create_user("owner")
    photo = create_attachment(owner, image_bytes("PNG"), filename="photo.png")[0]
    shot = create_attachment(owner, image_bytes("GIF"), filename="shot.gif")[0]
    spec = create_attachment(owner, pdf_bytes(), filename="spec.pdf")[0]
    conversation = create_conversation(owner=owner, title="pictures")
    append_messages(
        conversation,
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look"},
                    {"type": "image", "attachment_id": str(photo.pk)},
                    {"type": "file", "attachment_id": str(spec.pk)},
                ],
            },
            ChatMessage.assistant_tool_calls([ToolCall("c1", "screenshot")]),
            ChatMessage.tool_result("c1", [TextPart("the screen"), ImagePart(str(shot.pk))]),
            ChatMessage.assistant("Seen."),
        ],
    )
    return conversation, photo, shot, spec


def test_transcript_shows_thumbnails_and_file_links(
    staff_client: Client, conversation: tuple[Conversation, Attachment, Attachment, Attachment]
) -> None:
    chat, photo, shot, spec = conversation
    staff_client.get(change_url(chat))  # fills the content type cache
    with CaptureQueriesContext(connection) as queries:
        response = staff_client.get(change_url(chat))
    assert response.status_code == 200
    # One more query than a page without attachments: the attachments shown.
    assert len(queries) == CHANGE_PAGE_QUERIES + 1
    html = response.content.decode()
    for image in (photo, shot):
        assert f'<img class="llmconv-thumb" src="{content_url(image)}"' in html
    assert f'href="{content_url(spec)}">spec.pdf (application/pdf, {spec.size} B)</a>' in html


def test_staff_download_the_bytes(
    staff_client: Client, conversation: tuple[Conversation, Attachment, Attachment, Attachment]
) -> None:
    _, photo, _, spec = conversation
    response = staff_client.get(content_url(photo))
    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert b"".join(response.streaming_content) == image_bytes("PNG")
    response = staff_client.get(content_url(spec))
    assert response["Content-Disposition"] == 'attachment; filename="spec.pdf"'
    page = staff_client.get(
        reverse("admin:llm_conversations_attachment_change", args=[photo.pk])
    ).content.decode()
    assert f'src="{content_url(photo)}"' in page


def test_others_cannot_download(
    conversation: tuple[Conversation, Attachment, Attachment, Attachment],
) -> None:
    _, photo, _, _ = conversation
    user = get_user_model().objects.create_user("plain", password="pw", is_staff=True)
    client = Client()
    client.force_login(user)
    assert client.get(content_url(photo)).status_code == 403
    assert Client().get(content_url(photo)).status_code == 302  # to the login page
