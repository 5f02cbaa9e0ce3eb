"""RUN_RATE (a throttle per user on run starts and retries) and MAX_ACTIVE_RUNS_PER_USER."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Conversation, Run, RunStatus
from tests.api.conftest import API_SETTINGS, calls_text
from tests.api.test_runs import run_url, start

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_cache")]


@pytest.fixture
def rated(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "RUN_RATE": "3/min"}


def client_for(user: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_a_burst_from_one_user_is_throttled_while_another_user_is_not(
    rated: None, user: User, other_user: User, conversation: Conversation
) -> None:
    alice = client_for(user)
    statuses = [start(alice, conversation, message=f"hi {n}").status_code for n in range(5)]
    assert statuses == [201, 201, 201, 429, 429]
    assert Run.objects.filter(conversation=conversation).count() == 3
    refused = start(alice, conversation, message="once more")
    assert refused.status_code == 429
    retry_after = int(refused["Retry-After"])
    assert 0 < retry_after <= 60
    error = refused.json()["error"]
    assert error["code"] == "throttled"
    assert error["details"] == {"retry_after": retry_after}
    # Mallory's starts count apart.
    mallory = client_for(other_user)
    own = create_conversation(owner=other_user)
    assert [start(mallory, own, message="hi").status_code for _ in range(3)] == [201] * 3
    assert Run.objects.filter(conversation=own).count() == 3


def test_reading_is_not_throttled(
    rated: None, client: APIClient, conversation: Conversation
) -> None:
    for n in range(3):
        assert start(client, conversation, message=f"hi {n}").status_code == 201
    for _ in range(5):
        assert client.get(f"/api/conversations/{conversation.pk}/runs/").status_code == 200
        assert client.get("/api/tools/").status_code == 200


def test_retries_count_toward_the_rate(
    rated: None, client: APIClient, conversation: Conversation
) -> None:
    failed = start(client, conversation, message="hi", provider="broken")
    assert failed.status_code == 502
    run = failed.json()["error"]["details"]["run"]
    assert client.post(run_url(run, "retry"), {}, format="json").status_code == 502
    assert client.post(run_url(run, "retry"), {}, format="json").status_code == 502
    response = client.post(run_url(run, "retry"), {}, format="json")
    assert response.status_code == 429
    assert "Retry-After" in response
    assert Run.objects.get().status == RunStatus.FAILED


def test_no_rate_means_no_throttle(client: APIClient, conversation: Conversation) -> None:
    for n in range(12):
        assert start(client, conversation, message=f"hi {n}").status_code == 201


def test_a_start_over_the_active_run_limit_is_429(
    settings: Any, client: APIClient, user: User, other_user: User
) -> None:
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "MAX_ACTIVE_RUNS_PER_USER": 1}
    waiting = create_conversation(owner=user)
    paused = start(client, waiting, message=calls_text(("d", "delete_file", {"path": "/x"})))
    assert paused.json()["status"] == "requires_action"
    second = create_conversation(owner=user)
    response = start(client, second, message="hello")
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "too_many_active_runs"
    assert not second.messages.exists()
    # Another user is not limited by Alice's runs.
    own = create_conversation(owner=other_user)
    assert start(client_for(other_user), own, message="hello").status_code == 201
    # Once the waiting run ends, Alice may start again.
    assert client.post(run_url(paused.json(), "cancel")).status_code == 200
    assert start(client, second, message="hello").status_code == 201
