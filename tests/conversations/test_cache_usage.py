"""Cache reads, cache writes and reasoning tokens: stored on turns and runs,
priced, and summed on the usage page (docs/costs.md)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from llm_conversations.conversations import append_completion, append_messages, create_conversation
from llm_conversations.core.completions import CompletionResponse, Usage
from llm_conversations.core.messages import ChatMessage
from llm_conversations.models import Message
from llm_conversations.providers import AnthropicProvider
from llm_conversations.runs import ToolLoopService

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("staff", "s@example.com", "pw"))
    return client


REPLY = {
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Hi."}],
    "stop_reason": "end_turn",
    "usage": {
        "input_tokens": 10,
        "cache_read_input_tokens": 300,
        "cache_creation_input_tokens": 40,
        "output_tokens": 5,
    },
}


def test_cache_writes_are_stored_on_the_turn_and_run_and_priced_at_the_write_rate() -> None:
    provider = AnthropicProvider(
        model="claude-sonnet-4-5",
        api_key="k",
        http_client=httpx.Client(
            transport=httpx.MockTransport(lambda request: httpx.Response(200, json=REPLY))
        ),
        streams=False,
    )
    run = ToolLoopService(provider).send(create_conversation(), ChatMessage.user("hi"))
    turn = Message.objects.get(run=run, role="assistant")
    assert (turn.input_tokens, turn.cached_tokens, turn.cache_write_tokens) == (350, 300, 40)
    assert turn.reasoning_tokens is None
    # 10 x 3.00 + 300 x 0.30 + 40 x 3.75 + 5 x 15.00 dollars per million tokens.
    assert turn.cost == Decimal("0.000345")
    run.refresh_from_db()
    assert (run.cached_tokens, run.cache_write_tokens, run.reasoning_tokens) == (300, 40, 0)
    assert run.cost == turn.cost


def test_reasoning_tokens_are_stored_and_summed_per_run() -> None:
    conversation = create_conversation()
    append_messages(conversation, [ChatMessage.user("hi")])
    usage = Usage(input_tokens=100, output_tokens=50, reasoning_tokens=30)
    reply = CompletionResponse(content="hello", usage=usage, model="gpt-5", provider="openai")
    row = append_completion(conversation, reply)
    assert Message.objects.get(pk=row.pk).reasoning_tokens == 30


def test_the_usage_page_shows_cache_reads_writes_reasoning_and_the_hit_share(
    staff_client: Client,
) -> None:
    conversation = create_conversation()
    for cached, written in ((600, 100), (200, 0)):
        append_messages(conversation, [ChatMessage.user("hi")])
        usage = Usage(
            input_tokens=1000,
            output_tokens=10,
            cached_tokens=cached,
            cache_write_tokens=written,
            reasoning_tokens=4,
        )
        reply = CompletionResponse(
            content="hello", usage=usage, model="claude-haiku-4-5", provider="anthropic"
        )
        append_completion(conversation, reply)
    response = staff_client.get(reverse("admin:llm_conversations_conversation_usage"))
    by_model: Any = response.context["sections"][0]
    (total,) = by_model["totals"]
    assert (total.input_tokens, total.cached_tokens, total.cache_write_tokens) == (2000, 800, 100)
    assert total.reasoning_tokens == 8
    assert total.cache_hit_share == "40.0%"
    assert "Cache hit share" in response.content.decode()
    assert "40.0%" in response.content.decode()
