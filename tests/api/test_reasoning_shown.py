"""Reasoning where people look: AI SDK reasoning parts (stream and history), the admin.

The model's reasoning text reaches end users only with ``SHOW_REASONING``;
opaque reasoning data (signatures, redacted reasoning) never does. Staff see
the text folded in the admin transcript, and how many opaque parts there are.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import Reasoning, ReasoningKind
from llm_conversations.providers import Provider, ResponseCompleted, StreamEvent, TextDelta
from llm_conversations.runs import ToolLoopService
from tests.api import test_ai_sdk_node as node_sdk
from tests.api.conftest import API_SETTINGS
from tests.api.test_ai_sdk import parse_chunks

pytestmark = pytest.mark.django_db(transaction=True)

THOUGHT = "The user greets me; greet back."
REASONING = (
    Reasoning("thinker", ReasoningKind.THINKING, THOUGHT, "SIG-SECRET"),
    Reasoning("thinker", ReasoningKind.REDACTED, data="REDACTED-SECRET"),
)


class Thinker(Provider):
    """Answers with reasoning: a thought with its signature, and a redacted part."""

    backend = "thinker"
    uses_http = False

    def send(self, request: Any) -> CompletionResponse:
        return CompletionResponse("Hello!", reasoning=REASONING)

    def send_stream(self, request: Any) -> Iterator[StreamEvent]:
        yield TextDelta("Hello!")
        yield ResponseCompleted(self.send(request))


def configure(settings: Any, *, show: bool) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "PROVIDERS": {
            "thinker": {"BACKEND": "tests.api.test_reasoning_shown.Thinker", "MODEL": "t"}
        },
        "DEFAULT_PROVIDER": "thinker",
        "SHOW_REASONING": show,
    }


@pytest.fixture
def owner() -> User:
    return User.objects.create_user("nora", password="nora-pw")


def streamed_and_stored(owner: User) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    conversation = create_conversation(owner=owner)
    run = ToolLoopService().send(conversation, "Hi")
    client = APIClient()
    client.force_authenticate(owner)
    base = f"/api/conversations/{conversation.pk}"
    response = client.get(f"{base}/runs/{run.pk}/events/?format=ai-sdk")
    chunks = [chunk for _, chunk in parse_chunks(response)]
    history = client.get(f"{base}/chat/messages/").json()
    return chunks, history


def test_reasoning_text_is_a_reasoning_part_when_shown(settings: Any, owner: User) -> None:
    configure(settings, show=True)
    chunks, history = streamed_and_stored(owner)
    reasoning = [c for c in chunks if c["type"].startswith("reasoning-")]
    assert [c["type"] for c in reasoning] == ["reasoning-start", "reasoning-delta", "reasoning-end"]
    assert reasoning[1]["delta"] == THOUGHT
    answer = history[1]
    assert answer["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Hello!", "state": "done"},
        {"type": "reasoning", "id": reasoning[0]["id"], "text": THOUGHT, "state": "done"},
    ]
    for shown in (str(chunks), str(history)):
        assert "SECRET" not in shown


def test_reasoning_stays_on_the_server_by_default(settings: Any, owner: User) -> None:
    configure(settings, show=False)
    chunks, history = streamed_and_stored(owner)
    assert not [c for c in chunks if c["type"].startswith("reasoning")]
    assert [p["type"] for p in history[1]["parts"]] == ["step-start", "text"]
    assert THOUGHT not in str(chunks) + str(history)


@pytest.mark.skipif(node_sdk.MISSING is not None, reason=str(node_sdk.MISSING))
def test_the_ai_sdk_rebuilds_the_reasoning_part_the_history_has(
    settings: Any, live_server: Any, owner: User
) -> None:
    configure(settings, show=True)
    conversation = create_conversation(owner=owner)
    api = f"{live_server.url}/api/conversations/{conversation.pk}/chat/"
    result = node_sdk.run_node(
        {
            "mode": "chat",
            "api": api,
            "chatId": str(conversation.pk),
            "text": "Hi",
            "history": f"{api}messages/",
        }
    )
    assert result["errors"] == []
    assert "historyError" not in result
    answer = result["messages"][1]
    assert [p["type"] for p in answer["parts"]] == ["step-start", "text", "reasoning"]
    assert answer["parts"][2]["text"] == THOUGHT
    assert result["history"][1] == answer


def test_staff_see_the_reasoning_folded_in_the_admin(settings: Any, owner: User) -> None:
    configure(settings, show=False)  # staff see it whatever end users may
    conversation = create_conversation(owner=owner)
    ToolLoopService().send(conversation, "Hi")
    staff = User.objects.create_superuser("staff", "s@example.com", "pw")
    client = Client()
    client.force_login(staff)
    url = reverse("admin:llm_conversations_conversation_change", args=[conversation.pk])
    html = client.get(url).content.decode()
    folded = html[html.index('<details class="llmconv-reasoning">') :]
    folded = folded[: folded.index("</details>")]
    assert THOUGHT in folded
    assert "1 opaque part" in folded
    assert "SECRET" not in html
