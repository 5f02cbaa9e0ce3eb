"""Conversations: create, list (pagination, search, ordering), retrieve, update, delete."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Conversation, Run, RunStatus
from tests.api.conftest import calls_text

pytestmark = pytest.mark.django_db

URL = "/api/conversations/"


def test_create_with_title_and_metadata_owned_by_the_caller(client: APIClient, user: User) -> None:
    response = client.post(URL, {"title": "Trip", "metadata": {"lang": "fr"}}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["title"] == "Trip"
    assert body["metadata"] == {"lang": "fr"}
    assert (body["message_count"], body["active_run"]) == (0, None)
    assert Conversation.objects.get(pk=body["id"]).owner == user


def test_create_ignores_read_only_fields(client: APIClient) -> None:
    response = client.post(URL, {"title": "x", "message_count": 99}, format="json")
    assert response.json()["message_count"] == 0


@pytest.mark.parametrize(
    ("payload", "code", "field"),
    [
        ({"metadata": {"a": 1, "b": 2, "c": 3, "d": 4}}, "too_many_metadata_keys", "metadata"),
        ({"metadata": [1, 2]}, "invalid", "metadata"),
        ({"metadata": None}, "invalid", "metadata"),
        ({"title": "x" * 201}, "invalid", "title"),
        # Over the limit as sent, within it once trimmed: a string is kept as sent.
        ({"title": " " + "x" * 200}, "invalid", "title"),
        ({"title": "a\x00b"}, "invalid_text", "title"),
        ({"metadata": {"k": "a\x00b"}}, "invalid_text", "metadata.k"),
    ],
)
def test_create_validation_errors(
    client: APIClient, payload: dict[str, Any], code: str, field: str
) -> None:
    response = client.post(URL, payload, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field)
    assert not Conversation.objects.exists()


def test_a_title_is_kept_as_sent(client: APIClient) -> None:
    response = client.post(URL, {"title": " Trip "}, format="json")
    assert response.json()["title"] == " Trip "


def test_malformed_json_and_wrong_media_type(client: APIClient) -> None:
    response = client.post(URL, "{nope", content_type="application/json")
    assert (response.status_code, response.json()["error"]["code"]) == (400, "parse_error")
    response = client.post(URL, "title=x", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_retrieve_shows_message_count_last_activity_and_active_run(
    client: APIClient, conversation: Conversation
) -> None:
    run = Run.objects.create(conversation=conversation, status=RunStatus.REQUIRES_ACTION)
    body = client.get(f"{URL}{conversation.pk}/").json()
    assert body["message_count"] == 1
    assert body["active_run"] == str(run.pk)
    assert body["updated_at"].endswith("Z")


def test_partial_update_of_title_and_metadata(
    client: APIClient, conversation: Conversation
) -> None:
    response = client.patch(
        f"{URL}{conversation.pk}/", {"title": "Renamed", "metadata": {"k": 1}}, format="json"
    )
    assert response.status_code == 200
    conversation.refresh_from_db()
    assert (conversation.title, conversation.metadata) == ("Renamed", {"k": 1})
    response = client.put(f"{URL}{conversation.pk}/", {"title": "x"}, format="json")
    assert (response.status_code, response.json()["error"]["code"]) == (405, "method_not_allowed")


def test_delete_trashes_or_removes_the_conversation_but_not_while_a_run_is_active(
    client: APIClient, conversation: Conversation
) -> None:
    run = Run.objects.create(conversation=conversation, status=RunStatus.RUNNING)
    for query in ("", "?permanent=true"):
        response = client.delete(f"{URL}{conversation.pk}/{query}")
        assert (response.status_code, response.json()["error"]["code"]) == (
            409,
            "conversation_busy",
        )
    run.status = RunStatus.CANCELLED
    run.save()
    assert client.delete(f"{URL}{conversation.pk}/").status_code == 204
    conversation.refresh_from_db()
    assert conversation.trashed_at is not None
    assert client.delete(f"{URL}{conversation.pk}/?permanent=true").status_code == 204
    assert not Conversation.objects.exists()


def test_list_is_paginated_searched_and_ordered(client: APIClient, user: User) -> None:
    for title in ["alpha", "beta", "gamma", "alphabet"]:
        create_conversation(owner=user, title=title)
    body = client.get(URL, {"page_size": 3}).json()
    assert body["count"] == 4
    assert len(body["results"]) == 3
    assert body["next"] is not None
    # Default order: most recent activity first.
    assert [c["title"] for c in body["results"]] == ["alphabet", "gamma", "beta"]
    searched = client.get(URL, {"search": "alpha", "ordering": "title"}).json()
    assert [c["title"] for c in searched["results"]] == ["alpha", "alphabet"]
    descending = client.get(URL, {"ordering": "-title"}).json()
    assert [c["title"] for c in descending["results"]][:2] == ["gamma", "beta"]
    response = client.get(URL, {"page": 99})
    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")
    assert response.json()["error"]["message"] == "Invalid page."


@pytest.mark.parametrize("size", [1, 20])
def test_list_query_count_is_constant_in_page_size(
    client: APIClient, user: User, size: int
) -> None:
    for index in range(25):
        conversation = create_conversation(owner=user, title=f"c{index}")
        Run.objects.create(conversation=conversation, status=RunStatus.REQUIRES_ACTION)
    with CaptureQueriesContext(connection) as queries:
        body = client.get(URL, {"page_size": size}).json()
    assert len(body["results"]) == size
    assert all(item["active_run"] for item in body["results"])
    # One COUNT and one SELECT (the active run is a subquery), whatever the page size.
    assert len(queries) == 2


def test_delete_during_a_paused_run_is_409_and_keeps_everything(
    client: APIClient, conversation: Conversation
) -> None:
    run = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": calls_text(("d", "delete_file", {"path": "/"}))},
        format="json",
    ).json()
    assert run["status"] == "requires_action"
    response = client.delete(f"{URL}{conversation.pk}/")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conversation_busy"
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    assert Run.objects.get().status == RunStatus.REQUIRES_ACTION
    assert client.get(f"{URL}{conversation.pk}/").json()["active_run"] == run["id"]
