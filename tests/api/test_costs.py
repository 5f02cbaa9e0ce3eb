"""Costs in the API: a run's, each assistant message's and a conversation's."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from llm_conversations.api.serializers import RunSerializer
from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ChatMessage
from llm_conversations.models import Conversation, Message, Run
from llm_conversations.runs import ToolLoopService
from tests.api.conftest import API_SETTINGS, calls_text

pytestmark = pytest.mark.django_db

PRICES = {"input": "1000", "cached_input": "100", "output": "3000"}


@pytest.fixture(autouse=True)
def priced(settings: Any, api_settings: dict[str, Any]) -> None:
    echo = {**API_SETTINGS["PROVIDERS"]["echo"], "MODEL_INFO": {"echo": {"prices": PRICES}}}
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "PROVIDERS": {**API_SETTINGS["PROVIDERS"], "echo": echo},
    }


def test_run_message_and_conversation_show_the_same_cost(
    client: APIClient, conversation: Conversation
) -> None:
    url = f"/api/conversations/{conversation.pk}/"
    run = client.post(
        f"{url}runs/",
        {"message": calls_text(("a", "get_weather", {"city": "Oslo"}))},
        format="json",
    ).json()
    turns = Message.objects.filter(role="assistant")
    total = sum(turn.cost for turn in turns if turn.cost is not None)
    assert len(turns) == 2
    assert total > 0
    assert Decimal(run["cost"]) == total
    assert run["cost"] == f"{total:f}"  # ten places, as stored
    assert Decimal(client.get(url).json()["cost"]) == total
    assert Decimal(client.get(f"{url}runs/{run['id']}/").json()["cost"]) == total
    messages = client.get(f"{url}messages/").json()["data"]
    assert sorted(Decimal(m["cost"]) for m in messages if m["role"] == "assistant") == sorted(
        turn.cost for turn in turns if turn.cost is not None
    )
    assert all(m["cost"] is None for m in messages if m["role"] != "assistant")


def test_a_new_conversation_has_cost_nothing(client: APIClient) -> None:
    body = client.post("/api/conversations/", {"title": "t"}, format="json").json()
    assert body["cost"] == "0.0000000000"


@pytest.mark.parametrize("size", [1, 20])
def test_conversation_costs_are_read_in_the_page_query(
    client: APIClient, user: User, size: int
) -> None:
    service = ToolLoopService()
    for index in range(25):
        service.send(create_conversation(owner=user, title=f"c{index}"), ChatMessage.user("hi"))
    with CaptureQueriesContext(connection) as queries:
        body = client.get("/api/conversations/", {"page_size": size}).json()
    assert len(body["results"]) == size
    assert all(Decimal(item["cost"]) > 0 for item in body["results"])
    # One COUNT and one SELECT (active run and cost are subqueries).
    assert len(queries) == 2


def test_a_run_whose_calls_have_no_price_has_no_cost(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = API_SETTINGS  # the echo backend without prices
    runs = f"/api/conversations/{conversation.pk}/runs/"
    run = client.post(runs, {"message": "hi"}, format="json").json()
    assert run["iterations"] == 1
    # Unknown, as its turn's is: never a zero that reads as free.
    assert run["cost"] is None
    assert client.get(f"{runs}{run['id']}/").json()["cost"] is None
    assert client.get(runs).json()["results"][0]["cost"] is None
    (turn,) = Message.objects.filter(role="assistant")
    assert turn.cost is None


def test_a_priced_run_that_cost_nothing_says_zero(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    free = {"prices": {"input": "0", "output": "0"}}
    echo = {**API_SETTINGS["PROVIDERS"]["echo"], "MODEL_INFO": {"echo": free}}
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "PROVIDERS": {"echo": echo}}
    run = client.post(
        f"/api/conversations/{conversation.pk}/runs/", {"message": "hi"}, format="json"
    ).json()
    assert run["cost"] == "0.0000000000"
    # A run that has made no call yet has spent nothing, priced or not.
    queued = Run(conversation=conversation, status="queued")
    assert RunSerializer(queued).data["cost"] == "0.0000000000"
