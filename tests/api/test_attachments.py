"""The attachment endpoints, and messages and runs that show attachments by id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Attachment, Conversation, Message
from tests.support.attachment_files import bomb_bytes, image_bytes, pdf_bytes

URL = "/api/attachments/"


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def upload(
    client: APIClient, data: bytes, name: str = "red.png", content_type: str = "image/png"
) -> Any:
    return client.post(
        URL, {"file": SimpleUploadedFile(name, data, content_type=content_type)}, format="multipart"
    )


def test_upload_answers_the_id_and_metadata(client: APIClient, user: User) -> None:
    data = image_bytes("PNG", (64, 48))
    response = upload(client, data)
    assert response.status_code == 201, response.json()
    body = response.json()
    attachment = Attachment.objects.get()
    assert body == {
        "id": str(attachment.pk),
        "filename": "red.png",
        "mime_type": "image/png",
        "kind": "image",
        "size": len(data),
        "sha256": attachment.sha256,
        "width": 64,
        "height": 48,
        "pages": None,
        "created_at": body["created_at"],
    }
    assert attachment.owner == user
    again = upload(client, data, name="copy.png")
    assert (again.status_code, again.json()["id"]) == (200, body["id"])


def test_metadata_and_content_are_the_owners_only(
    client: APIClient, other_user: User, django_assert_num_queries: Any
) -> None:
    data = pdf_bytes(2)
    attachment_id = upload(client, data, "spec.pdf", "application/pdf").json()["id"]
    with django_assert_num_queries(1):
        response = client.get(f"{URL}{attachment_id}/")
    assert response.json()["pages"] == 2
    content = client.get(f"{URL}{attachment_id}/content/")
    assert content.status_code == 200
    assert b"".join(content.streaming_content) == data
    assert content["Content-Type"] == "application/pdf"
    assert content["X-Content-Type-Options"] == "nosniff"
    assert content["Content-Disposition"] == 'attachment; filename="spec.pdf"'
    stranger = APIClient()
    stranger.force_authenticate(other_user)
    for path in (f"{URL}{attachment_id}/", f"{URL}{attachment_id}/content/", f"{URL}nope/"):
        response = stranger.get(path)
        assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")


@pytest.mark.parametrize(
    ("data", "content_type", "code"),
    [
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml", "unsupported_type"),
        (image_bytes("PNG"), "image/gif", "type_mismatch"),
        (image_bytes("PNG")[:60], "image/png", "invalid_image"),
        (bomb_bytes(), "image/png", "image_too_large"),
        (pdf_bytes()[:-8], "application/pdf", "invalid_pdf"),
    ],
)
def test_hostile_uploads_are_400_and_store_nothing(
    client: APIClient, media_root: Path, data: bytes, content_type: str, code: str
) -> None:
    response = upload(client, data, content_type=content_type)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["field"] == "file"
    assert not Attachment.objects.exists()
    assert not any(path.is_file() for path in media_root.rglob("*"))


def test_an_oversize_upload_is_refused_before_it_is_read(client: APIClient, settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "ATTACHMENT_MAX_BYTES": 1000}
    response = upload(client, image_bytes("PNG", (400, 400)) + b"\x00" * 100_000)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    response = upload(client, b"\x89PNG\r\n\x1a\n" + b"\x00" * 2000)
    assert (response.status_code, response.json()["error"]["code"]) == (400, "attachment_too_large")
    assert not Attachment.objects.exists()


def test_an_upload_without_a_file_is_refused(client: APIClient) -> None:
    response = client.post(URL, {"file": "not a file"}, format="multipart")
    assert (response.status_code, response.json()["error"]["code"]) == (400, "missing_file")


@pytest.mark.parametrize("content_type", ["", "application/json", "text/plain"])
def test_a_body_that_is_not_multipart_is_415_as_the_schema_says(
    client: APIClient, content_type: str
) -> None:
    response = client.generic("POST", "/api/attachments/", b"{}", content_type=content_type)
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"
    assert not Attachment.objects.exists()
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    assert "415" in schema["paths"]["/api/attachments/"]["post"]["responses"]


def test_messages_show_attachments_by_id(client: APIClient, conversation: Conversation) -> None:
    attachment_id = upload(client, image_bytes("PNG")).json()["id"]
    parts = [
        {"type": "text", "text": "What is it?"},
        {"type": "image", "attachment_id": attachment_id},
    ]
    response = client.post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"role": "user", "content": parts},
        format="json",
    )
    assert response.status_code == 201, response.json()
    listed = client.get(f"/api/conversations/{conversation.pk}/messages/").json()["data"]
    [shown] = [message for message in listed if message["position"] == 1]
    assert shown["content"] == parts
    assert shown["role"] == "user"
    assert Message.objects.get(conversation=conversation, position=1).attachments.count() == 1


def test_a_message_cannot_show_another_users_attachment(
    client: APIClient, conversation: Conversation, other_user: User
) -> None:
    stranger = APIClient()
    stranger.force_authenticate(other_user)
    theirs = upload(stranger, image_bytes("PNG")).json()["id"]
    response = client.post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"role": "user", "content": [{"type": "image", "attachment_id": theirs}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "unknown_attachment",
        "message": f"no attachment {theirs} of yours.",
        "field": "content[0].attachment_id",
        "details": None,
    }


def test_a_run_answers_a_user_turn_with_an_image(client: APIClient, user: User) -> None:
    conversation = create_conversation(owner=user)
    data = image_bytes("PNG", (64, 64))
    attachment_id = upload(client, data).json()["id"]
    message = {"role": "user", "content": [{"type": "image", "attachment_id": attachment_id}]}
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/", {"message": message}, format="json"
    )
    assert response.status_code == 201, response.json()
    answer = conversation.messages.get(position=1)
    assert answer.content == f"[image/png 64x64, {len(data)} B]"
