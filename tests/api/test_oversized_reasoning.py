"""A reply whose reasoning exceeds a turn's bounds is stored within them, never a 500.

An Anthropic server on 127.0.0.1 answers with more thinking blocks than a turn
holds (``MAX_REASONING_PARTS``): the run completes, the answer and its calls
are stored whole, the shown thinking text is kept as one part that is never
sent back, and the turn's ``metadata`` says how many parts were left out. The
next round, continuing the tool turn, goes without ``thinking`` as it does
for a turn another provider made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from rest_framework.test import APIClient

from llm_conversations.conversations import load_messages
from llm_conversations.core.reasoning import MAX_REASONING_PARTS, Reasoning, ReasoningKind
from llm_conversations.models import Conversation, Message, Run
from tests.api.conftest import API_SETTINGS, parse_sse
from tests.support.http_server import serving

pytestmark = pytest.mark.django_db

BLOCKS = MAX_REASONING_PARTS + 44


def thinking(count: int) -> list[dict[str, Any]]:
    return [
        {"type": "thinking", "thinking": f"step {n}.", "signature": f"SIG-{n}"}
        for n in range(count)
    ]


def reply(round_: int) -> dict[str, Any]:
    usage = {"input_tokens": 5, "output_tokens": 3}
    if round_ == 0:
        content = [
            *thinking(BLOCKS),
            {"type": "tool_use", "id": "toolu_a", "name": "get_time", "input": {}},
        ]
        return {"model": "claude", "content": content, "stop_reason": "tool_use", "usage": usage}
    content = [{"type": "text", "text": "It is 09:00."}]
    return {"model": "claude", "content": content, "stop_reason": "end_turn", "usage": usage}


def as_stream(message: dict[str, Any]) -> bytes:
    """``message`` as the Messages API streams it, one block at a time."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {"model": message["model"], "usage": message["usage"]},
        }
    ]
    for index, block in enumerate(message["content"]):
        if block["type"] == "thinking":
            start = {"type": "thinking", "thinking": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        elif block["type"] == "tool_use":
            start = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        else:
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"]}})
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


@pytest.fixture
def anthropic(settings: Any) -> Iterator[list[dict[str, Any]]]:
    """An Anthropic server that thinks too much in its first round; the request bodies."""
    bodies: list[dict[str, Any]] = []

    def respond(handler: BaseHTTPRequestHandler) -> None:
        body = json.loads(handler.body)  # type: ignore[attr-defined]
        bodies.append(body)
        message = reply(len(bodies) - 1)
        streamed = bool(body.get("stream"))
        payload = as_stream(message) if streamed else json.dumps(message).encode()
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream" if streamed else "application/json")
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    with serving(respond) as server:
        entry = {
            "BACKEND": "anthropic",
            "MODEL": "claude",
            "API_KEY": "k",
            "BASE_URL": server.root,
            "MAX_RETRIES": 0,
            "OPTIONS": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
        }
        providers = {**API_SETTINGS["PROVIDERS"], "thinker": entry}
        settings.LLM_CONVERSATIONS = {**API_SETTINGS, "PROVIDERS": providers}
        yield bodies


# The provider is called streaming either way; the API's ``stream`` decides what the client reads.
@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_a_reply_with_more_thinking_blocks_than_a_turn_holds_is_stored_within_the_bounds(
    anthropic: list[dict[str, Any]], client: APIClient, conversation: Conversation, stream: bool
) -> None:
    body = {"message": "Time?", "provider": "thinker", "tools": ["get_time"], "stream": stream}
    response = client.post(f"/api/conversations/{conversation.pk}/runs/", body, format="json")
    if stream:
        assert response.status_code == 200
        (_, ended), *_ = reversed(parse_sse(b"".join(response.streaming_content)))
        run = ended["run"]
    else:
        assert response.status_code == 201, response.json()
        run = response.json()
    assert (run["status"], run["termination_reason"]) == ("completed", "completed")
    thought = Message.objects.get(run_id=run["id"], tool_calls__isnull=False)
    # What a turn cannot hold is recorded, never lost silently.
    assert thought.metadata == {"reasoning_omitted": BLOCKS}
    history = load_messages(conversation)
    assert history[-1].content == "It is 09:00."
    (kept,) = history[2].reasoning or ()
    # The shown thinking stays readable, unsigned, so it is never sent back.
    assert kept == Reasoning(
        "anthropic", ReasoningKind.THINKING, "\n\n".join(f"step {n}." for n in range(BLOCKS))
    )
    assert [call.id for call in history[2].tool_calls or ()] == ["toolu_a"]
    # The tool turn continues without thinking, as Anthropic requires of a turn without blocks.
    second = anthropic[1]
    assert "thinking" not in second
    assert [block["type"] for block in second["messages"][1]["content"]] == ["tool_use"]
    assert Run.objects.get(pk=run["id"]).error_type == ""
