"""A worker dies while a reply streams (tests/api/test_lost_attempts.py): AG-UI's
streams show the stored answer, and a live reader is told the lost text was superseded."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from llm_conversations.api.streams.ag_ui import AgUiStream
from llm_conversations.models import Conversation
from llm_conversations.runs.log.reader import read_page
from tests.api.test_ag_ui import parse_events
from tests.api.test_lost_attempts import (
    ANSWER,
    answer_again,
    lose_attempt_one,
    lost_halfway,  # noqa: F401 - the provider that loses its first attempt
)

pytestmark = pytest.mark.django_db(transaction=True)

SUPERSEDED = {"llm_conversations": {"superseded": True}}


def visible_text(events: list[dict[str, Any]]) -> str:
    """The text a UI shows: every text message but those ended as superseded."""
    texts: dict[str, str] = {}
    superseded: set[str] = set()
    for event in events:
        if event["type"] == "TEXT_MESSAGE_CONTENT":
            texts[event["messageId"]] = texts.get(event["messageId"], "") + event["delta"]
        elif event["type"] == "TEXT_MESSAGE_END" and event.get("metadata") == SUPERSEDED:
            superseded.add(event["messageId"])
    return "".join(text for message, text in texts.items() if message not in superseded)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
def test_the_stream_read_afterwards_shows_the_stored_answer(
    client: APIClient, conversation: Conversation, stream: bool
) -> None:
    run = answer_again(lose_attempt_one(conversation), stream=stream)
    url = f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/?format=ag-ui"
    events = [event for _, event in parse_events(client.get(url))]
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == ANSWER
    assert [e for e in events if e.get("metadata") == SUPERSEDED] == []


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
def test_a_live_reader_is_told_the_lost_text_was_superseded(
    conversation: Conversation, stream: bool
) -> None:
    run = lose_attempt_one(conversation)
    renderer = AgUiStream(run.pk)
    # The reader had the lost half before attempt 2 began.
    seen = read_page(run.pk, 0)
    first = renderer.render(seen)
    answer_again(run, stream=stream)
    rest = read_page(run.pk, seen.last_id or 0)
    body = first + renderer.render(rest) + renderer.end()

    class Response(dict[str, str]):
        streaming_content = [body]

    events = [e for _, e in parse_events(Response({"Content-Type": "text/event-stream"}))]
    assert [e["type"] for e in events if e.get("metadata") == SUPERSEDED] == ["TEXT_MESSAGE_END"]
    assert visible_text(events) == ANSWER
    assert events[-1]["type"] == "RUN_FINISHED"
