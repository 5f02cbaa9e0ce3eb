"""Reasoning where people look: streamed as the model writes it (the three stream
formats), AI SDK reasoning parts in the history, the admin.

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

from llm_conversations.api.streams.ai_sdk import reasoning_part_id
from llm_conversations.conversations import create_conversation
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import Reasoning, ReasoningKind
from llm_conversations.models import Message, RunEvent, RunEventType
from llm_conversations.providers import (
    Provider,
    ReasoningDelta,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
)
from llm_conversations.runs import ToolLoopService
from tests.api import test_ai_sdk_node as node_sdk
from tests.api.conftest import API_SETTINGS, parse_sse
from tests.api.test_ag_ui import parse_events
from tests.api.test_ai_sdk import parse_chunks

pytestmark = pytest.mark.django_db(transaction=True)

THOUGHT = "The user greets me; greet back."
REASONING = (
    Reasoning("thinker", ReasoningKind.THINKING, THOUGHT, "SIG-SECRET"),
    Reasoning("thinker", ReasoningKind.REDACTED, data="REDACTED-SECRET"),
)


class Thinker(Provider):
    """Answers with reasoning: a thought with its signature, and a redacted part.
    Its stream writes the thought in pieces, then the text."""

    backend = "thinker"
    uses_http = False

    def send(self, request: Any) -> CompletionResponse:
        return CompletionResponse("Hello!", reasoning=REASONING)

    def send_stream(self, request: Any) -> Iterator[StreamEvent]:
        yield ReasoningDelta(THOUGHT[:8])
        yield ReasoningDelta(THOUGHT[8:])
        yield TextDelta("Hello!")
        yield ResponseCompleted(self.send(request))


class QuietThinker(Thinker):
    """A stream of the text alone: the reasoning comes with the whole reply."""

    def send_stream(self, request: Any) -> Iterator[StreamEvent]:
        yield TextDelta("Hello!")
        yield ResponseCompleted(self.send(request))


def configure(settings: Any, *, show: bool, backend: type[Thinker] = Thinker) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "PROVIDERS": {"thinker": {"BACKEND": f"{__name__}.{backend.__name__}", "MODEL": "t"}},
        "DEFAULT_PROVIDER": "thinker",
        "SHOW_REASONING": show,
    }


@pytest.fixture
def owner() -> User:
    return User.objects.create_user("nora", password="nora-pw")


def answered(owner: User) -> tuple[APIClient, str, str]:
    """A conversation answered by the configured thinker: the client, its URL, the run's id."""
    conversation = create_conversation(owner=owner)
    run = ToolLoopService().send(conversation, "Hi")
    client = APIClient()
    client.force_authenticate(owner)
    return client, f"/api/conversations/{conversation.pk}", str(run.pk)


def streamed_and_stored(owner: User) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    client, base, run_id = answered(owner)
    response = client.get(f"{base}/runs/{run_id}/events/?format=ai-sdk")
    chunks = [chunk for _, chunk in parse_chunks(response)]
    history = client.get(f"{base}/chat/messages/").json()
    return chunks, history


def test_reasoning_streams_as_the_model_writes_it_and_is_what_is_stored(
    settings: Any, owner: User
) -> None:
    configure(settings, show=True)
    client, base, run_id = answered(owner)
    logged = RunEvent.objects.filter(run_id=run_id).order_by("id")
    kinds = [e.type for e in logged]
    assert kinds.index(RunEventType.REASONING_DELTA) < kinds.index(RunEventType.TEXT_DELTA)
    thought = "".join(e.data["delta"] for e in logged if e.type == RunEventType.REASONING_DELTA)
    stored = Message.objects.get(run_id=run_id, role="assistant")
    assert thought == THOUGHT == stored.reasoning[0]["text"]
    events = parse_sse(b"".join(client.get(f"{base}/runs/{run_id}/events/").streaming_content))
    shown = [data["delta"] for name, data in events if name == "reasoning.delta"]
    assert "".join(shown) == THOUGHT


def test_reasoning_nobody_may_see_is_never_logged(settings: Any, owner: User) -> None:
    configure(settings, show=False)
    _, _, run_id = answered(owner)
    kinds = set(RunEvent.objects.filter(run_id=run_id).values_list("type", flat=True))
    assert RunEventType.TEXT_DELTA in kinds
    assert RunEventType.REASONING_DELTA not in kinds
    assert Message.objects.get(run_id=run_id, role="assistant").reasoning[0]["text"] == THOUGHT


def test_a_log_with_reasoning_shows_none_once_it_is_not_shown(settings: Any, owner: User) -> None:
    configure(settings, show=True)
    client, base, run_id = answered(owner)
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "SHOW_REASONING": False}
    for query in ("", "?format=ai-sdk", "?format=ag-ui"):
        body = b"".join(client.get(f"{base}/runs/{run_id}/events/{query}").streaming_content)
        assert b"Hello!" in body
        assert THOUGHT[:8] not in body.decode(), query


def test_streamed_reasoning_is_a_reasoning_part_before_the_text(settings: Any, owner: User) -> None:
    configure(settings, show=True)
    chunks, history = streamed_and_stored(owner)
    types = [c["type"] for c in chunks if c["type"].startswith(("reasoning-", "text-"))]
    # The two pieces arrived within TEXT_FLUSH_SECONDS: one delta.
    assert types == [
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-end",
    ]
    pieces = [c["delta"] for c in chunks if c["type"] == "reasoning-delta"]
    assert "".join(pieces) == THOUGHT
    answer = history[1]
    stored_id = reasoning_part_id(Message.objects.get(role="assistant").pk, 0)
    assert answer["parts"] == [
        {"type": "step-start"},
        {"type": "reasoning", "id": stored_id, "text": THOUGHT, "state": "done"},
        {"type": "text", "text": "Hello!", "state": "done"},
    ]
    for shown in (str(chunks), str(history)):
        assert "SECRET" not in shown


def test_reasoning_that_did_not_stream_comes_whole_after_the_streamed_text(
    settings: Any, owner: User
) -> None:
    configure(settings, show=True, backend=QuietThinker)
    chunks, _ = streamed_and_stored(owner)
    reasoning = [c for c in chunks if c["type"].startswith(("reasoning-", "text-"))]
    assert [c["type"] for c in reasoning] == [
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
    ]
    assert reasoning[4]["delta"] == THOUGHT
    assert "SECRET" not in str(chunks)


def test_ag_ui_streams_reasoning_as_a_reasoning_message(settings: Any, owner: User) -> None:
    configure(settings, show=True)
    client, base, run_id = answered(owner)
    events = parse_events(client.get(f"{base}/runs/{run_id}/events/?format=ag-ui"))
    kinds = [e["type"] for _, e in events if e["type"].startswith(("REASONING", "TEXT"))]
    assert kinds == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]
    thought = [e for _, e in events if e["type"] == "REASONING_MESSAGE_CONTENT"]
    assert "".join(e["delta"] for e in thought) == THOUGHT
    assert {e["messageId"] for e in thought} != {
        e["messageId"] for _, e in events if e["type"] == "TEXT_MESSAGE_CONTENT"
    }


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
    assert [p["type"] for p in answer["parts"]] == ["step-start", "reasoning", "text"]
    assert answer["parts"][1]["text"] == THOUGHT
    # A reload shows what streamed; the streamed part was named by its first event.
    reloaded = result["history"][1]
    assert reloaded["parts"][1].pop("id") != answer["parts"][1].pop("id")
    assert reloaded == answer


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
