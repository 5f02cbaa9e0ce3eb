"""The run policy through the API: GET providers/, GET tools/, and 403 for a run asking more."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from llm_conversations.models import Conversation, Message, Run, RunStatus
from tests.api.conftest import API_SETTINGS, calls_text
from tests.api.test_runs import run_url, start

pytestmark = pytest.mark.django_db

SECRET_KEY = "sk-do-not-show"
SECRET_URL = "https://proxy-user:proxy-pass@llm.example.com/v1"
SETTINGS: dict[str, Any] = {
    **API_SETTINGS,
    "PROVIDERS": {
        **API_SETTINGS["PROVIDERS"],
        "echo": {"BACKEND": "echo", "MODEL": "echo", "MODELS": ["echo-large"]},
        "hosted": {
            "BACKEND": "openai",
            "MODEL": "gpt-4o-mini",
            "MODELS": ["gpt-4o"],
            "API_KEY": SECRET_KEY,
            "BASE_URL": SECRET_URL,
            "OPTIONS": {"extra_headers": {"X-Secret": SECRET_KEY}},
        },
    },
}
POLICY = {**SETTINGS, "RUN_POLICY": "tests.runs.test_policy.OnlyEcho"}


@pytest.fixture(autouse=True)
def with_providers(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = SETTINGS


@pytest.fixture
def restricted(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = POLICY


def test_providers_lists_every_provider_with_models_and_parameters(
    client: APIClient, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(0):
        response = client.get("/api/providers/")
    assert response.status_code == 200
    body = response.json()
    assert [p["name"] for p in body] == ["echo", "broken", "hosted"]
    hosted = body[2]
    assert hosted == {
        "name": "hosted",
        "backend": "openai",
        "default": False,
        "model": "gpt-4o-mini",
        "models": ["gpt-4o-mini", "gpt-4o"],
        "parameters": {
            "sampling": ["temperature", "top_p", "max_output_tokens", "stop", "seed"],
            "max_temperature": 2.0,
            "max_stop_sequences": 4,
            "reasoning_efforts": ["none", "minimal", "low", "medium", "high", "xhigh"],
            "tool_choices": ["auto", "none", "required", "tool"],
            "parallel_tool_calls": [False, True],
            "response_format": True,
        },
    }
    assert body[0]["default"] is True
    # Keys, URLs and headers never leave the server.
    text = response.content.decode()
    for secret in (SECRET_KEY, "proxy-pass", "llm.example.com", "X-Secret"):
        assert secret not in text


def test_providers_and_tools_show_only_what_the_policy_permits(
    client: APIClient, restricted: None
) -> None:
    providers = client.get("/api/providers/").json()
    assert [(p["name"], p["models"]) for p in providers] == [("echo", ["echo"])]
    tools = client.get("/api/tools/").json()
    assert [t["name"] for t in tools] == ["get_weather", "get_time"]


def test_tools_lists_every_tool_under_the_default_policy(client: APIClient) -> None:
    names = [t["name"] for t in client.get("/api/tools/").json()]
    assert names == ["get_weather", "get_time", "delete_file", "pick_color"]


def test_providers_needs_authentication(anonymous: APIClient) -> None:
    response = anonymous.get("/api/providers/")
    assert response.status_code in (401, 403)
    assert response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize(
    ("asked", "code", "field"),
    [
        ({"provider": "hosted"}, "provider_not_permitted", "provider"),
        ({"model": "echo-large"}, "model_not_permitted", "model"),
        ({"tools": ["delete_file"]}, "tool_not_permitted", "tools[0]"),
        ({"max_iterations": 5}, "max_iterations_not_permitted", "max_iterations"),
    ],
)
def test_a_run_asking_beyond_the_policy_is_403_and_stores_nothing(
    client: APIClient,
    conversation: Conversation,
    restricted: None,
    asked: dict[str, Any],
    code: str,
    field: str,
) -> None:
    before = Message.objects.count()
    response = start(client, conversation, message="hello", **asked)
    assert response.status_code == 403
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field)
    assert Message.objects.count() == before
    assert not Run.objects.exists()


def test_a_streamed_or_background_run_asking_more_is_also_refused(
    client: APIClient, conversation: Conversation, restricted: None
) -> None:
    for extra in ({"stream": True}, {"background": True}):
        response = start(client, conversation, message="hi", provider="hosted", **extra)
        assert response.status_code == 403
        assert response["Content-Type"].startswith("application/json")
    assert not Run.objects.exists()


def test_a_permitted_run_defaults_to_the_permitted_tools_and_limit(
    client: APIClient, conversation: Conversation, restricted: None
) -> None:
    response = start(client, conversation, message=calls_text(("a", "get_time", {})))
    assert response.status_code == 201
    run = response.json()
    assert (run["tools"], run["max_iterations"], run["status"]) == (
        ["get_weather", "get_time"],
        4,
        "completed",
    )


def test_a_retry_the_policy_no_longer_permits_is_403(
    client: APIClient, conversation: Conversation, settings: Any, user: User
) -> None:
    response = start(client, conversation, message="hello", provider="broken")
    assert response.status_code == 502
    run = response.json()["error"]["details"]["run"]
    settings.LLM_CONVERSATIONS = {
        **POLICY,
        "PROVIDERS": {**POLICY["PROVIDERS"]},
    }
    response = client.post(run_url(run, "retry"), {}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "provider_not_permitted"
    assert Run.objects.get().status == RunStatus.FAILED


def test_error_bodies_never_carry_provider_secrets(
    client: APIClient, conversation: Conversation, restricted: None
) -> None:
    response = start(client, conversation, message="hello", provider="hosted", model="gpt-4o")
    assert response.status_code == 403
    assert SECRET_KEY not in json.dumps(response.json())


def test_a_chat_message_asking_beyond_the_policy_is_403_and_stores_nothing(
    client: APIClient, conversation: Conversation, restricted: None
) -> None:
    from tests.api.test_ai_sdk import chat_body, user

    body = {**chat_body(user("hi")), "provider": "hosted"}
    response = client.post(f"/api/conversations/{conversation.pk}/chat/", body, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "provider_not_permitted"
    assert not Run.objects.exists()
