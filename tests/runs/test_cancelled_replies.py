"""A run cancelled while its reply streams keeps what it streamed as its answer.

The model streams 12 words; another request cancels the run. The text the
streams showed is stored as the assistant turn (finish reason ``cancelled``),
the conversation stays valid, and the next run continues from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Conversation, Run, RunEvent, RunStatus
from llm_conversations.providers import Provider, ResponseCompleted, StreamEvent, TextDelta
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.log import writer
from tests.api.conftest import API_SETTINGS
from tests.api.test_ai_sdk import parse_chunks
from tests.support.streaming import streamed

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = [f"w{n} " for n in range(12)]


class Slow(Provider):
    """Streams 12 words, then would go on (the test stops reading first); later replies whole."""

    backend = "slow"
    uses_http = False

    def send(self, request: Any) -> CompletionResponse:
        return CompletionResponse("again")

    def send_stream(self, request: Any) -> Iterator[StreamEvent]:
        if request.messages[-1].content != "Tell me a story.":
            yield ResponseCompleted(self.send(request))
            return
        for word in WORDS:
            yield TextDelta(word)
        raise AssertionError("the test stops reading before this")


@pytest.fixture(autouse=True)
def slow(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "PROVIDERS": {"slow": {"BACKEND": "tests.runs.test_cancelled_replies.Slow", "MODEL": "s"}},
        "DEFAULT_PROVIDER": "slow",
    }
    monkeypatch.setattr(writer, "TEXT_FLUSH_CHARS", 1)


def cancel_mid_reply(conversation: Conversation) -> Run:
    loop = ToolLoopService()
    run = loop.start(conversation, "Tell me a story.")
    executing = streamed(loop, run.pk, len(WORDS))
    loop.cancel(run.pk)
    executing.close()
    run.refresh_from_db()
    return run


def test_the_streamed_text_is_kept_as_the_cancelled_answer() -> None:
    conversation = create_conversation()
    run = cancel_mid_reply(conversation)
    assert run.status == RunStatus.CANCELLED
    answer = conversation.messages.get(role="assistant")
    assert (answer.content, answer.finish_reason, answer.run_id) == (
        "".join(WORDS),
        "cancelled",
        run.pk,
    )
    assert (answer.model, answer.input_tokens, answer.cost) == ("s", None, None)
    kinds = list(RunEvent.objects.filter(run=run).order_by("id").values_list("type", flat=True))
    assert kinds[-2:] == ["message.stored", "run.cancelled"]
    check_sequence(load_messages(conversation))
    # The conversation goes on from the kept text.
    follow_up = ToolLoopService().send(conversation, "Go on.")
    assert follow_up.status == RunStatus.COMPLETED
    assert [m.role for m in load_messages(conversation)] == ["user", "assistant"] * 2


def test_a_cancel_before_any_text_keeps_no_turn() -> None:
    conversation = create_conversation()
    run = ToolLoopService().start(conversation, "Tell me a story.")
    ToolLoopService().cancel(run.pk)
    assert [m.role for m in load_messages(conversation)] == ["user"]


def test_the_ai_sdk_stream_of_a_cancelled_run_shows_the_kept_text(user: Any) -> None:
    conversation = create_conversation(owner=user)
    run = cancel_mid_reply(conversation)
    client = APIClient()
    client.force_authenticate(user)
    response = client.get(
        f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/?format=ai-sdk"
    )
    chunks = [chunk for _, chunk in parse_chunks(response)]
    text = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    assert text == conversation.messages.get(role="assistant").content
    assert [c["type"] for c in chunks][-3:] == ["finish-step", "abort", "finish"]
    history = client.get(f"/api/conversations/{conversation.pk}/chat/messages/").json()
    assert history[1]["parts"][1] == {"type": "text", "text": "".join(WORDS), "state": "done"}


@pytest.fixture
def user() -> Any:
    from django.contrib.auth.models import User

    return User.objects.create_user("cara")


def suspended_mid_reply(conversation: Conversation) -> tuple[Run, Any]:
    """A run whose model has streamed every word and is still answering."""
    loop = ToolLoopService()
    run = loop.start(conversation, "Tell me a story.")
    return run, streamed(loop, run.pk, len(WORDS))


def test_the_ai_sdk_stop_endpoint_cancels_and_keeps_the_streamed_text(user: Any) -> None:
    conversation = create_conversation(owner=user)
    run, executing = suspended_mid_reply(conversation)
    client = APIClient()
    client.force_authenticate(user)
    stop = f"/api/conversations/{conversation.pk}/chat/{conversation.pk}/stop"
    # A stop naming another stream is stale: nothing is cancelled.
    stale = client.post(stop, {"activeStreamId": "an-older-run"}, format="json")
    assert stale.status_code == 204
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    refused = client.post(stop, {"activeStreamID": str(run.pk)}, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "unknown_field")
    snapshot = {"id": str(run.pk), "role": "assistant", "parts": [{"type": "text", "text": "x"}]}
    response = client.post(
        stop, {"activeStreamId": str(run.pk), "assistantMessage": snapshot}, format="json"
    )
    executing.close()
    assert response.status_code == 200, response.content
    assert (response.json()["id"], response.json()["status"]) == (str(run.pk), "cancelled")
    # The log's text is kept, not the client's snapshot.
    answer = conversation.messages.get(role="assistant")
    assert (answer.content, answer.finish_reason) == ("".join(WORDS), "cancelled")
    assert client.post(stop, {}, format="json").status_code == 204  # nothing left to stop


def test_another_users_chat_cannot_be_stopped(user: Any) -> None:
    from django.contrib.auth.models import User

    conversation = create_conversation(owner=User.objects.create_user("dan"))
    run = ToolLoopService().start(conversation, "Tell me a story.")
    client = APIClient()
    client.force_authenticate(user)
    response = client.post(
        f"/api/conversations/{conversation.pk}/chat/{conversation.pk}/stop/", {}, format="json"
    )
    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
