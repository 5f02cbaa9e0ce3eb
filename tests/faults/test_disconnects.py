"""A client that disconnects ends only its following: one provider request per round.

A fake provider on 127.0.0.1 paces its streams (a tool call, then an answer in
pieces), so a client can go away before the first delta, during the tool,
mid-answer or at the end. Whenever it goes, under WSGI or ASGI, the run
completes in the process that executes it, the model call in flight included
(never asked again, never asked without a stream), and a client that
reattaches gets the rest live.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import User
from django.db import connections
from django.test import AsyncClient
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Run, RunEvent, RunEventType, RunStatus
from tests.api.conftest import parse_sse

from .conftest import Configure
from .server import Exchange, FakeProvider

# Transactional: closing a response fires request_finished, which closes the
# database connection as a real server would.
pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = "The weather in Paris is sunny today, as the tool says it is."
PIECE_SECONDS = 0.03

# Where a client goes away: before reading anything, or after the chunk holding
# the first event of a type (the answer's first delta, its stored turn).
POINTS: dict[str, bytes | None] = {
    "before the first delta": None,
    "during a tool": b"event: tool_call.started",
    "mid-answer": b"event: text.delta",
    "at the end": b'"role":"assistant","content":"The weather',
}


def paced(
    seconds: float = PIECE_SECONDS, gate: threading.Event | None = None
) -> Callable[..., None]:
    """A stream sent an SSE event at a time: a call of ``lookup``, then, once the tool
    answered, ``ANSWER`` in pieces (waiting for ``gate`` after the first piece)."""

    def act(ex: Exchange) -> None:
        if ex.body["messages"][-1]["role"] == "tool":
            ex.pace(ex.render(ANSWER), seconds, None if gate is None else {1: gate})
        else:
            ex.pace(
                ex.render(calls=[("c1", "lookup", '{"city": "Paris"}')], finish="tool"), seconds
            )

    return act


def start_streamed(client: APIClient, conversation_id: Any) -> Any:
    return client.post(
        f"/api/conversations/{conversation_id}/runs/",
        {"message": "Weather in Paris?", "stream": True},
        format="json",
    )


def assert_one_request_per_round(fake: FakeProvider, run: Run) -> None:
    run.refresh_from_db()
    assert (run.status, run.termination_reason) == (RunStatus.COMPLETED, "completed")
    # Two rounds (the call, the answer): two requests, both streamed, none repeated.
    assert [seen.stream for seen in fake.requests] == [True, True]
    messages = load_messages(run.conversation_id)
    assert check_sequence(messages) == ()
    deltas = RunEvent.objects.filter(run=run, type=RunEventType.TEXT_DELTA).order_by("id")
    assert "".join(e.data["delta"] for e in deltas) == messages[-1].content == ANSWER


@pytest.mark.parametrize("point", list(POINTS))
def test_a_wsgi_client_that_goes_away_leaves_one_request_per_round(
    point: str, fake: FakeProvider, configure: Configure, client: APIClient, user: User
) -> None:
    configure("openai")
    fake.play([], every_time=paced())
    conversation = create_conversation(owner=user)
    response = start_streamed(client, conversation.pk)
    marker = POINTS[point]
    if marker is not None:
        for chunk in response.streaming_content:
            if marker in chunk:
                break
    response.close()  # what a WSGI server does when the client has gone
    assert_one_request_per_round(fake, Run.objects.get(conversation=conversation))


@pytest.mark.parametrize("point", list(POINTS))
def test_an_asgi_client_that_goes_away_leaves_one_request_per_round(
    point: str, fake: FakeProvider, configure: Configure, user: User
) -> None:
    configure("openai")
    fake.play([], every_time=paced())
    conversation = create_conversation(owner=user)

    async def go_away() -> None:
        client = AsyncClient()
        await client.aforce_login(user)
        response = await client.post(
            f"/api/conversations/{conversation.pk}/runs/",
            json.dumps({"message": "Weather in Paris?", "stream": True}),
            content_type="application/json",
        )
        iterator = aiter(response.streaming_content)
        marker = POINTS[point]
        if marker is not None:
            async for chunk in iterator:
                if marker in chunk:
                    break
        # What Django's ASGI handler does when the client leaves: the iterator is
        # closed, then the response, from a thread.
        await iterator.aclose()
        await sync_to_async(response.close)()

    async_to_sync(go_away)()
    assert_one_request_per_round(fake, Run.objects.get(conversation=conversation))


def test_a_client_that_reattaches_mid_answer_gets_the_rest_live(
    fake: FakeProvider, configure: Configure, user: User
) -> None:
    configure("openai")
    gate = threading.Event()
    # Pieces further apart than the log joins them: each arrives as an event.
    fake.play([], every_time=paced(0.08, gate=gate))
    conversation = create_conversation(owner=user)
    seen: dict[str, Any] = {}
    away = threading.Event()

    def first_client() -> None:
        try:
            client = APIClient()
            client.force_authenticate(user)
            response = start_streamed(client, conversation.pk)
            for chunk in response.streaming_content:
                if b"event: text.delta" in chunk:
                    seen["last_id"] = parse_ids(chunk)[-1]
                    break
            away.set()
            response.close()  # goes on here until the run ends
        finally:
            connections.close_all()

    thread = threading.Thread(target=first_client)
    thread.start()
    assert away.wait(10)
    run = Run.objects.get(conversation=conversation)
    client = APIClient()
    client.force_authenticate(user)
    response = client.get(
        f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/",
        HTTP_LAST_EVENT_ID=str(seen["last_id"]),
    )
    gate.set()  # the model goes on writing only now: what follows arrives live
    received = []
    try:
        for chunk in response.streaming_content:
            received.append((time.monotonic(), chunk))
            if b"event: run.completed" in chunk:
                break
    finally:
        response.close()  # as a server does: the follower stops listening
    thread.join(10)
    events = parse_sse(b"".join(chunk for _, chunk in received))
    assert events[-1][0] == "run.completed"
    deltas = [data["delta"] for name, data in events if name == "text.delta"]
    assert deltas  # the rest of the answer, as it was written
    # Live, not replayed at the end: the first piece came a pacing step before the end.
    first = next(at for at, chunk in received if b"event: text.delta" in chunk)
    assert received[-1][0] - first >= 0.06
    first_text = RunEvent.objects.get(pk=seen["last_id"]).data["delta"]
    assert first_text + "".join(deltas) == ANSWER
    assert [seen.stream for seen in fake.requests] == [True, True]


def parse_ids(chunk: bytes) -> list[int]:
    return [int(line[4:]) for line in chunk.decode().splitlines() if line.startswith("id: ")]
