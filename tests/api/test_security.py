"""Owner isolation on every endpoint, anonymous access, malformed ids, settings overrides."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from llm_conversations.models import Conversation, Message, Run
from llm_conversations.runs import ToolLoopService
from tests.api.conftest import API_SETTINGS, calls_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(conversation: Conversation) -> Run:
    """A run of alice's conversation, waiting for approval."""
    service = ToolLoopService()
    return service.execute(
        service.start(
            conversation,
            {"role": "user", "content": calls_text(("d", "delete_file", {"path": "/"}))},
        ).pk
    )


def endpoints(
    conversation: Any, run: Any
) -> list[tuple[str, str, dict[str, Any] | list[Any] | None]]:
    """Every endpoint that names an object: (method, url, body)."""
    c = f"/api/conversations/{conversation}"
    r = f"{c}/runs/{run}"
    return [
        ("get", f"{c}/", None),
        ("patch", f"{c}/", {"title": "stolen"}),
        ("delete", f"{c}/", None),
        ("get", f"{c}/messages/", None),
        ("post", f"{c}/messages/", {"role": "user", "content": "injected"}),
        ("post", f"{c}/runs/", {"message": "injected"}),
        ("get", f"{r}/", None),
        ("post", f"{r}/approve/", {}),
        ("post", f"{r}/deny/", {}),
        (
            "post",
            f"{r}/submit_tool_outputs/",
            {"tool_outputs": [{"tool_call_id": "d", "output": "x"}]},
        ),
        ("post", f"{r}/cancel/", None),
    ]


def call(client: APIClient, method: str, url: str, body: Any) -> Any:
    return (
        getattr(client, method)(url, body, format="json")
        if body is not None
        else getattr(client, method)(url)
    )


def snapshot() -> tuple[Any, ...]:
    return (
        list(Conversation.objects.values_list("title", "metadata", "message_count")),
        Message.objects.count(),
        list(Run.objects.values_list("status", "decisions")),
    )


def test_another_users_objects_are_404_on_every_endpoint(
    other_user: User, conversation: Conversation, run: Run
) -> None:
    intruder = APIClient()
    intruder.force_authenticate(other_user)
    before = snapshot()
    for method, url, body in endpoints(conversation.pk, run.pk):
        response = call(intruder, method, url, body)
        assert response.status_code == 404, (method, url)
        assert response.json()["error"]["code"] == "not_found"
    assert snapshot() == before
    listed = intruder.get("/api/conversations/").json()
    assert listed["count"] == 0


def test_anonymous_requests_are_refused_on_every_endpoint(
    anonymous: APIClient, conversation: Conversation, run: Run
) -> None:
    before = snapshot()
    every = [
        *endpoints(conversation.pk, run.pk),
        ("get", "/api/conversations/", None),
        ("post", "/api/conversations/", {"title": "x"}),
        ("get", "/api/tools/", None),
    ]
    for method, url, body in every:
        response = call(anonymous, method, url, body)
        # Session authentication comes first in the demo: DRF answers 403.
        assert response.status_code == 403, (method, url)
        assert response.json()["error"]["code"] == "not_authenticated"
    assert snapshot() == before


def test_basic_authentication_first_gives_401_with_a_challenge(
    settings: Any, anonymous: APIClient, user: User
) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "AUTHENTICATION_CLASSES": ["rest_framework.authentication.BasicAuthentication"],
    }
    response = anonymous.get("/api/conversations/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Basic")
    anonymous.credentials(HTTP_AUTHORIZATION="Basic YWxpY2U6YWxpY2UtcHc=")  # alice:alice-pw
    assert anonymous.get("/api/conversations/").status_code == 200


def test_permission_classes_come_from_settings(
    settings: Any, client: APIClient, anonymous: APIClient, conversation: Conversation
) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    }
    response = client.get("/api/conversations/")
    assert (response.status_code, response.json()["error"]["code"]) == (403, "permission_denied")
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    }
    # Open to anyone, yet still scoped: an anonymous caller owns nothing.
    assert anonymous.get("/api/conversations/").json()["count"] == 0
    assert anonymous.get(f"/api/conversations/{conversation.pk}/").status_code == 404


@pytest.mark.parametrize("bad", ["nope", "123", "00000000-0000-0000-0000-00000000000g", "%20"])
def test_malformed_ids_are_404_never_500(
    client: APIClient, conversation: Conversation, run: Run, bad: str
) -> None:
    for method, url, body in [
        *endpoints(bad, run.pk),
        *endpoints(conversation.pk, bad)[6:],
    ]:
        response = call(client, method, url, body)
        assert response.status_code == 404, (method, url)
        assert response.json()["error"]["code"] == "not_found"


def test_writes_that_record_a_user_refuse_an_anonymous_caller_the_settings_let_in(
    settings: Any, anonymous: APIClient, tmp_path: Any
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from llm_conversations.models import Attachment
    from tests.support.attachment_files import image_bytes

    settings.MEDIA_ROOT = tmp_path
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    }
    image = SimpleUploadedFile("red.png", image_bytes(), content_type="image/png")
    response = anonymous.post("/api/attachments/", {"file": image}, format="multipart")
    # DRF answers 403 when the authentication scheme sends no WWW-Authenticate challenge.
    assert (response.status_code, response.json()["error"]["code"]) == (403, "not_authenticated")
    assert not Attachment.objects.exists()
