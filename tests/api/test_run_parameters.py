"""Run parameters and structured output through ``POST runs/``, retries included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from llm_conversations.models import Conversation, Message, Run
from tests.api.conftest import API_SETTINGS
from tests.api.test_runs import run_url, runs_url, start

pytestmark = pytest.mark.django_db

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
}
UNSET = {
    "temperature": None,
    "top_p": None,
    "max_output_tokens": None,
    "stop": None,
    "seed": None,
    "reasoning_effort": None,
    "tool_choice": None,
    "parallel_tool_calls": None,
    "response_format": None,
}


@pytest.fixture(autouse=True)
def with_models(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "PROVIDERS": {
            **API_SETTINGS["PROVIDERS"],
            "echo": {"BACKEND": "echo", "MODEL": "echo", "MODELS": ["echo-large"]},
            "local": {"BACKEND": "ollama", "MODEL": "llama3.2"},
        },
    }


def test_a_run_keeps_and_shows_its_parameters(
    client: APIClient, conversation: Conversation
) -> None:
    answer = '{"city": "Paris", "celsius": 18}'
    response = start(
        client,
        conversation,
        message=answer + " and more",
        instructions="Answer in JSON.",
        model="echo-large",
        temperature=0.4,
        top_p=1,
        max_output_tokens=200,
        stop=" and more",
        seed=5,
        reasoning_effort="low",
        tool_choice={"name": "get_time"},
        parallel_tool_calls=False,
        response_format=CITY,
    )
    assert response.status_code == 201, response.json()
    run = response.json()
    assert (run["status"], run["model"], run["instructions"]) == (
        "completed",
        "echo-large",
        "Answer in JSON.",
    )
    assert run["parameters"] == {
        "temperature": 0.4,
        "top_p": 1.0,
        "max_output_tokens": 200,
        "stop": [" and more"],
        "seed": 5,
        "reasoning_effort": "low",
        "tool_choice": {"name": "get_time"},
        "parallel_tool_calls": False,
        "response_format": CITY,
    }
    assert client.get(run_url(run)).json() == run
    page = client.get(f"/api/conversations/{conversation.pk}/messages/").json()
    reply = page["data"][0]
    assert (reply["role"], reply["content"], reply["model"]) == ("assistant", answer, "echo-large")
    assert reply["parsed"] == {"city": "Paris", "celsius": 18}
    assert page["data"][1]["parsed"] is None  # the user turn
    # The instructions were sent, not stored.
    assert not Message.objects.filter(content="Answer in JSON.").exists()


def test_a_run_without_parameters_shows_them_unset(
    client: APIClient, conversation: Conversation
) -> None:
    run = start(client, conversation, message="hi").json()
    assert (run["instructions"], run["model"], run["parameters"]) == (None, "echo", UNSET)


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"temperature": 2.5}, "invalid", "temperature"),
        ({"temperature": "0.5"}, "invalid", "temperature"),
        ({"max_output_tokens": 0}, "invalid", "max_output_tokens"),
        ({"stop": [1]}, "invalid", "stop"),
        ({"tool_choice": "any"}, "invalid", "tool_choice"),
        ({"reasoning_effort": "extreme"}, "invalid", "reasoning_effort"),
        ({"response_format": []}, "invalid", "response_format"),
        ({"instructions": "x" * 1001}, "too_large", "instructions"),
        ({"model": "gpt-5"}, "model_not_allowed", "model"),
        ({"tool_choice": {"name": "nope"}}, "tool_not_offered", "tool_choice.name"),
        ({"tool_choice": "required", "tools": []}, "tool_not_offered", "tool_choice"),
        ({"response_format": {"type": "string"}}, "invalid_response_format", "response_format"),
        ({"stop": ["ok", ""]}, "invalid_parameter", "stop[1]"),
        (
            {"provider": "local", "tool_choice": "required"},
            "unsupported_parameter",
            "tool_choice",
        ),
        (
            {"provider": "local", "parallel_tool_calls": False},
            "unsupported_parameter",
            "parallel_tool_calls",
        ),
    ],
)
def test_refused_parameters_are_a_400_and_store_nothing(
    client: APIClient, conversation: Conversation, body: dict[str, Any], code: str, field: str
) -> None:
    response = start(client, conversation, message="hi", **body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field)
    assert not Run.objects.exists()
    conversation.refresh_from_db()
    assert conversation.message_count == 1


def test_an_unsupported_parameter_names_provider_and_parameter(
    client: APIClient, conversation: Conversation
) -> None:
    response = start(client, conversation, message="hi", provider="local", tool_choice="required")
    assert response.json()["error"]["message"] == (
        "provider 'local' (ollama) cannot honour tool_choice 'required' (it takes auto, none)."
    )


def test_an_answer_that_never_matches_is_a_502_invalid_output(
    client: APIClient, conversation: Conversation
) -> None:
    response = start(client, conversation, message="Sunny.", response_format=CITY)
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "invalid_output"
    run = error["details"]["run"]
    assert (run["status"], run["termination_reason"]) == ("failed", "invalid_output")
    assert run["error"]["type"] == "InvalidOutput"
    page = client.get(f"/api/conversations/{conversation.pk}/messages/", {"order": "asc"})
    roles = [(m["role"], m["parsed"]) for m in page.json()["data"]]
    assert roles == [
        ("user", None),
        ("user", None),
        ("assistant", None),
        ("user", None),  # the repair round
        ("assistant", None),
    ]


def test_a_retry_uses_the_runs_parameters(client: APIClient, conversation: Conversation) -> None:
    failed = start(client, conversation, message="Sunny.", response_format=CITY, stop=":").json()[
        "error"
    ]["details"]["run"]
    response = client.post(run_url(failed, "retry"), {}, format="json")
    # The echo backend repeats the repair prompt, cut at the stop sequence: still invalid.
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "invalid_output"
    replies = Message.objects.filter(conversation=conversation, role="assistant")
    assert [m.content for m in replies.order_by("position")] == [
        "Sunny.",
        "Your previous answer does not match the required JSON Schema",
        "Your previous answer does not match the required JSON Schema",
    ]
    assert Run.objects.get().parameters == {"stop": [":"], "response_format": CITY}


def test_a_background_start_answers_the_queued_run_with_its_parameters(
    client: APIClient, conversation: Conversation, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        response = start(client, conversation, message="hi", background=True, temperature=0, seed=3)
    assert response.status_code == 202
    run = response.json()
    assert run["status"] == "queued"
    assert run["parameters"] == {**UNSET, "temperature": 0.0, "seed": 3}


def test_the_run_list_shows_parameters_in_two_queries(
    client: APIClient,
    conversation: Conversation,
    django_assert_num_queries: Any,
) -> None:
    for index in range(3):
        start(client, conversation, message=json.dumps({"n": index}), seed=index)
    with django_assert_num_queries(2):
        page = client.get(runs_url(conversation)).json()
    assert [run["parameters"]["seed"] for run in page["results"]] == [2, 1, 0]
