"""Costs: each assistant turn priced from its stored usage, summed per run,
conversation and user; recomputed here from stored usage and prices."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.utils import timezone

from llm_conversations.conversations import create_conversation
from llm_conversations.conversations.costs import conversation_cost, user_cost, with_cost
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.model_info import Prices, cost_of
from llm_conversations.models import Conversation, Message
from llm_conversations.runs import ToolLoopService
from tests.support import loop_tools

pytestmark = pytest.mark.django_db

# Dollars per million tokens; large so that the echo backend's small counts show.
PRICES = {"input": "1000", "cached_input": "100", "output": "3000"}
PRICED = {
    "DEFAULT_PROVIDER": "echo",
    "PROVIDERS": {
        "echo": {"BACKEND": "echo", "MODEL": "echo", "MODEL_INFO": {"echo": {"prices": PRICES}}}
    },
}


def calls_text(*calls: tuple[str, str, dict[str, Any]]) -> str:
    return json.dumps(
        {
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ]
        }
    )


def send(conversation: Conversation, text: str) -> Any:
    return ToolLoopService(tools=loop_tools.registry()).send(conversation, ChatMessage.user(text))


def recomputed(message: Message, prices: dict[str, str]) -> Decimal:
    """The cost of a stored turn, from its stored usage and ``prices``."""
    assert message.input_tokens is not None
    assert message.output_tokens is not None
    return cost_of(
        Prices(**{key: Decimal(value) for key, value in prices.items()}),
        message.input_tokens,
        message.cached_tokens,
        message.output_tokens,
    )


@override_settings(LLM_CONVERSATIONS=PRICED)
def test_every_turn_is_priced_and_summed_per_run_conversation_and_user() -> None:
    owner = get_user_model().objects.create_user("ada")
    conversation = create_conversation(owner=owner)
    first = send(conversation, calls_text(("c1", "get_weather", {"city": "Oslo"})))
    second = send(conversation, "thanks")
    other = create_conversation(owner=owner)
    third = send(other, "hello")

    turns = list(Message.objects.filter(role="assistant").order_by("created_at", "position"))
    assert len(turns) == 4
    for turn in turns:
        assert turn.cost is not None
        assert turn.cost > 0
        assert turn.cost == recomputed(turn, PRICES)
    for run in (first, second, third):
        run.refresh_from_db()
        assert run.cost == sum(t.cost for t in turns if t.run_id == run.pk)
    assert first.cost > 0
    assert conversation_cost(conversation) == first.cost + second.cost
    assert with_cost(Conversation.objects.filter(pk=other.pk)).get().cost == third.cost
    assert user_cost(owner) == first.cost + second.cost + third.cost
    assert user_cost(owner, since=timezone.now() + timedelta(seconds=1)) == 0


def test_a_model_without_prices_has_no_turn_cost_and_adds_nothing() -> None:
    owner = get_user_model().objects.create_user("bo")
    conversation = create_conversation(owner=owner)
    run = send(conversation, "hello")
    turn = Message.objects.get(role="assistant")
    assert turn.input_tokens
    assert turn.cost is None
    assert run.cost == 0
    assert conversation_cost(conversation) == 0
    assert user_cost(owner) == 0
    assert with_cost(Conversation.objects.all()).get().cost == 0


def test_a_stored_cost_keeps_the_prices_in_force_when_it_was_stored() -> None:
    conversation = create_conversation()
    with override_settings(LLM_CONVERSATIONS=PRICED):
        send(conversation, "one")
    cheaper = {"input": "1", "cached_input": "1", "output": "1"}
    repriced = {**PRICED, "PROVIDERS": {"echo": {**PRICED["PROVIDERS"]["echo"]}}}
    repriced["PROVIDERS"]["echo"]["MODEL_INFO"] = {"echo": {"prices": cheaper}}
    with override_settings(LLM_CONVERSATIONS=repriced):
        send(conversation, "two")
    old, new = Message.objects.filter(role="assistant").order_by("position")
    assert old.cost == recomputed(old, PRICES)
    assert new.cost == recomputed(new, cheaper)
    assert conversation_cost(conversation) == old.cost + new.cost
