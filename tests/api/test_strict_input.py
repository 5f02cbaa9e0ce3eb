"""A request body field the API does not know is refused by name, never ignored.

A typo such as ``temprature`` would otherwise run with the default and say
nothing; ``STRICT_REQUEST_FIELDS = False`` ignores unknown fields instead, for
clients newer than the server. Bodies whose shape a frontend toolkit owns (the
AI SDK's ``chat/``) keep taking what the toolkit adds. Fields the schema marks
``readOnly`` are known fields: they are ignored, as DRF does, so a client can
send back what it read.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from llm_conversations.api.schema import StrictTypesExtension  # noqa: F401 - registers it
from llm_conversations.models import Conversation, Message, Run
from tests.api.conftest import API_SETTINGS
from tests.api.test_runs import runs_url

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("url", "body", "unknown"),
    [
        ("runs", {"message": "hi", "temprature": 0.2}, "temprature"),
        ("runs", {"message": "hi", "stream": False, "zzz": 1, "aaa": 2}, "aaa"),
        ("conversations", {"title": "t", "owner": 5}, "owner"),
    ],
)
def test_an_unknown_field_is_400_unknown_field_naming_it_and_stores_nothing(
    client: APIClient, conversation: Conversation, url: str, body: dict[str, Any], unknown: str
) -> None:
    path = runs_url(conversation) if url == "runs" else "/api/conversations/"
    before = (Conversation.objects.count(), Message.objects.count(), Run.objects.count())
    response = client.post(path, body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("unknown_field", unknown)
    assert (Conversation.objects.count(), Message.objects.count(), Run.objects.count()) == before


def test_the_setting_relaxes_it_for_newer_clients(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "STRICT_REQUEST_FIELDS": False}
    response = client.post(
        runs_url(conversation), {"message": "hi", "temprature": 0.2}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["parameters"]["temperature"] is None


def test_the_ai_sdk_body_keeps_what_the_toolkit_adds(
    client: APIClient, conversation: Conversation
) -> None:
    message = {
        "id": "m1",
        "role": "user",
        "parts": [{"type": "text", "text": "hi"}],
        "createdAt": "2026-12-01T00:00:00Z",
    }
    body = {
        "id": str(conversation.pk),
        "messages": [message],
        "trigger": "submit-message",
        "custom": 1,
    }
    response = client.post(f"/api/conversations/{conversation.pk}/chat/", body, format="json")
    assert response.status_code == 200


def test_the_schema_says_strict_bodies_take_no_other_field(client: APIClient) -> None:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    run_body = schema["paths"]["/api/conversations/{conversation_pk}/runs/"]["post"]["requestBody"]
    ref = run_body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert schema["components"]["schemas"][ref]["additionalProperties"] is False


def test_read_only_fields_are_ignored_so_a_read_representation_can_be_sent_back(
    client: APIClient, conversation: Conversation
) -> None:
    # DRF's convention, kept on purpose: a client may send back what it read
    # (PATCH) with the fields the schema marks readOnly; they change nothing.
    url = f"/api/conversations/{conversation.pk}/"
    shown = client.get(url).json()
    body = {**shown, "title": "Renamed", "message_count": 99, "created_at": "2000-01-01T00:00:00Z"}
    response = client.patch(url, body, format="json")
    assert response.status_code == 200, response.json()
    after = response.json()
    assert after["title"] == "Renamed"
    assert (after["message_count"], after["created_at"], after["id"]) == (
        shown["message_count"],
        shown["created_at"],
        shown["id"],
    )
