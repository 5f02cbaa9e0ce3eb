"""A worker dies while a reply streams: every stream's final text is the stored answer.

Attempt 1 logs half of its reply as text deltas and stops answering (its
lease lapses, as when its process is killed); attempt 2 claims the run and
answers again, whole. A reader that reads the log afterwards never sees the
lost half; a reader that saw it live is told that it was superseded.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from llm_conversations.api.streams.ai_sdk import SUPERSEDED, AiSdkStream
from llm_conversations.conversations import create_conversation
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.models import Conversation, Run, RunEvent, RunStatus
from llm_conversations.providers import Provider, ResponseCompleted, StreamEvent, TextDelta
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.log import writer
from llm_conversations.runs.log.reader import read_page
from tests.api import test_ai_sdk_node as node_sdk
from tests.api.conftest import API_SETTINGS, parse_sse
from tests.api.test_ai_sdk import parse_chunks
from tests.support.streaming import streamed

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = [f"w{n}" for n in range(24)]
ANSWER = " ".join(WORDS)


class LostHalfway(Provider):
    """The first reply streams 12 of its 24 words and never finishes (its worker dies);
    every later one answers whole, a delta per word."""

    backend = "lost-halfway"
    uses_http = False
    replies = 0

    def send(self, request: Any) -> CompletionResponse:
        return CompletionResponse(ANSWER)

    def send_stream(self, request: Any) -> Iterator[StreamEvent]:
        LostHalfway.replies += 1
        if LostHalfway.replies == 1:
            for word in WORDS[:12]:
                yield TextDelta(word + " ")
            raise AssertionError("the test stops reading before this")
        for index, word in enumerate(WORDS):
            yield TextDelta(word if index == 0 else " " + word)
        yield ResponseCompleted(CompletionResponse(ANSWER))


@pytest.fixture(autouse=True)
def lost_halfway(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "PROVIDERS": {
            **API_SETTINGS["PROVIDERS"],
            "lossy": {"BACKEND": "tests.api.test_lost_attempts.LostHalfway", "MODEL": "l"},
        },
        "DEFAULT_PROVIDER": "lossy",
    }
    LostHalfway.replies = 0
    # Each piece of text is its own event, so the lost half is surely logged.
    monkeypatch.setattr(writer, "TEXT_FLUSH_CHARS", 1)


def lose_attempt_one(conversation: Conversation) -> Run:
    """Attempt 1 logs 12 words and its worker dies: its lease has lapsed."""
    loop = ToolLoopService()
    run = loop.start(conversation, "Count to 24.")
    executing = streamed(loop, run.pk, 12)
    # The process is gone: nobody renews the lease, the reaper finds it expired.
    Run.objects.filter(pk=run.pk).update(
        lease_owner="gone-host:1:dead", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    executing.close()
    return run


def answer_again(run: Run, *, stream: bool) -> Run:
    loop = ToolLoopService()
    if stream:
        for _ in loop.events(run.pk):
            pass
        run.refresh_from_db()
        return run
    return loop.execute(run.pk)


def lost_deltas(run: Run) -> list[str]:
    return [
        data["delta"]
        for data in RunEvent.objects.filter(run=run, type="text.delta")
        .order_by("id")
        .values_list("data", flat=True)
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["events", "execute"])
def test_the_new_attempt_says_which_text_it_supersedes(
    conversation: Conversation, stream: bool
) -> None:
    run = answer_again(lose_attempt_one(conversation), stream=stream)
    assert (run.status, run.attempts) == (RunStatus.COMPLETED, 2)
    assert run.messages.get(role="assistant").content == ANSWER
    starts = list(
        RunEvent.objects.filter(run=run, type="run.running").order_by("id").values_list("data")
    )
    first_delta = RunEvent.objects.filter(run=run, type="text.delta").order_by("id").first()
    assert first_delta is not None
    assert starts[0] == ({"attempt": 1},)
    assert starts[1] == ({"attempt": 2, "superseded_after": first_delta.id - 1},)
    # The lost half is still in the log, for the record.
    assert "".join(lost_deltas(run)).startswith(" ".join(WORDS[:12]) + " ")


@pytest.mark.parametrize("stream", [True, False], ids=["events", "execute"])
def test_the_default_stream_read_afterwards_holds_only_the_stored_answer(
    client: APIClient, conversation: Conversation, stream: bool
) -> None:
    run = answer_again(lose_attempt_one(conversation), stream=stream)
    response = client.get(f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/")
    events = parse_sse(b"".join(response.streaming_content))
    text = "".join(data["delta"] for name, data in events if name == "text.delta")
    assert text == ANSWER  # the new attempt streams, executed either way
    running = [data for name, data in events if name == "run.running"]
    assert [data["attempt"] for data in running] == [1, 2]
    assert "superseded_after" in running[1]
    assert events[-1][0] == "run.completed"


@pytest.mark.parametrize("stream", [True, False], ids=["events", "execute"])
def test_the_ai_sdk_stream_read_afterwards_shows_the_stored_answer(
    client: APIClient, conversation: Conversation, stream: bool
) -> None:
    run = answer_again(lose_attempt_one(conversation), stream=stream)
    response = client.get(
        f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/?format=ai-sdk"
    )
    chunks = [chunk for _, chunk in parse_chunks(response)]
    text = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    assert text == ANSWER
    assert [c for c in chunks if c.get("providerMetadata") == SUPERSEDED] == []


def visible_text(chunks: list[dict[str, Any]]) -> str:
    """The text a UI shows: every text part but those marked superseded."""
    parts: dict[str, str] = {}
    superseded: set[str] = set()
    for chunk in chunks:
        if chunk["type"] == "text-delta":
            parts[chunk["id"]] = parts.get(chunk["id"], "") + chunk["delta"]
        elif chunk["type"] == "text-end" and chunk.get("providerMetadata") == SUPERSEDED:
            superseded.add(chunk["id"])
    return "".join(text for part, text in parts.items() if part not in superseded)


@pytest.mark.parametrize("stream", [True, False], ids=["events", "execute"])
def test_a_live_ai_sdk_reader_is_told_the_lost_text_was_superseded(
    conversation: Conversation, stream: bool
) -> None:
    run = lose_attempt_one(conversation)
    renderer = AiSdkStream(run.pk)
    # The reader had the lost half before attempt 2 began.
    seen = read_page(run.pk, 0)
    assert seen.superseded == frozenset()
    first = renderer.render(seen).decode()
    answer_again(run, stream=stream)
    rest = read_page(run.pk, seen.last_id or 0)
    body = (first + renderer.render(rest).decode() + renderer.end().decode()).encode()

    class Response(dict[str, str]):
        streaming_content = [body]

    chunks = [
        chunk
        for _, chunk in parse_chunks(
            Response({"x-vercel-ai-ui-message-stream": "v1", "Content-Type": "text/event-stream"})
        )
    ]
    ends = [c for c in chunks if c["type"] == "text-end" and c.get("providerMetadata")]
    assert len(ends) == 1
    assert visible_text(chunks) == ANSWER
    # The superseded part ends its step; the answer has a step of its own.
    assert [c["type"] for c in chunks].count("start-step") == 2


@pytest.mark.skipif(node_sdk.MISSING is not None, reason=str(node_sdk.MISSING))
def test_the_ai_sdks_own_reader_rebuilds_the_stored_answer(live_server: Any) -> None:
    owner = User.objects.create_user("nora", password="nora-pw")
    conversation = create_conversation(owner=owner)
    run = answer_again(lose_attempt_one(conversation), stream=True)
    result = node_sdk.run_node(
        {
            "mode": "events",
            "url": f"{live_server.url}/api/conversations/{conversation.pk}/runs/{run.pk}"
            "/events/?format=ai-sdk",
        }
    )
    node_sdk.assert_clean(result, responses=1)
    assert result["messages"][0]["parts"] == node_sdk.stored_parts(conversation)
    texts = [part["text"] for part in result["messages"][0]["parts"] if part["type"] == "text"]
    assert texts == [ANSWER]
