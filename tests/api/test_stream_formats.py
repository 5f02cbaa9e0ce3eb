"""What every stream format holds to, tested once for the three (``STREAM_RENDERERS``):
the response that executes a run is the replay of its log, a reader that resumes
gets the rest, and a run cancelled mid-reply shows exactly the text it keeps.

The format-specific chunks are tested beside each format (test_ai_sdk.py,
test_ag_ui.py, test_run_events.py); here only what a format must keep whatever
it draws.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from llm_conversations.conversations import load_messages
from llm_conversations.core.messages import Role
from llm_conversations.models import Conversation, Run, RunEvent
from llm_conversations.runs import ToolLoopService
from tests.api.conftest import API_SETTINGS
from tests.api.test_run_events import TWO_CALLS, events_url

# Each format's query, and how it names a piece of text and the end of a cancelled run.
FORMATS = {
    "events": ("", "text.delta", "run.cancelled"),
    "ai-sdk": ("?format=ai-sdk", "text-delta", "abort"),
    "ag-ui": ("?format=ag-ui", "TEXT_MESSAGE_CONTENT", "RUN_FINISHED"),
}


@pytest.fixture(params=list(FORMATS))
def fmt(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def messages(body: bytes) -> list[tuple[int | None, str, dict[str, Any]]]:
    """``(id, kind, data)`` of each SSE message: ``kind`` is the ``event:`` name, or the
    ``type`` of the JSON chunk for the toolkits' formats."""
    out = []
    for block in body.decode().split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines or lines == ["data: [DONE]"]:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        data = json.loads(fields["data"])
        kind = fields.get("event") or data["type"]
        out.append((int(fields["id"]) if "id" in fields else None, kind, data))
    return out


def shown_text(fmt: str, body: bytes) -> str:
    text_kind = FORMATS[fmt][1]
    return "".join(data["delta"] for _, kind, data in messages(body) if kind == text_kind)


def without_run_state(fmt: str, body: bytes) -> list[Any]:
    """The default format sends the run as it stood with each ``run.*`` event; a replay
    sends it as it stands. Everything else must be the same bytes."""
    if fmt != "events":
        return [body]
    parsed = messages(body)
    kept = [(i, k, {key: v for key, v in d.items() if key != "run"}) for i, k, d in parsed[:-1]]
    return kept + parsed[-1:]


def test_the_stream_that_executes_a_run_is_its_replay(
    fmt: str, client: APIClient, conversation: Conversation
) -> None:
    query = FORMATS[fmt][0]
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/{query}",
        {"message": TWO_CALLS, "stream": True},
        format="json",
    )
    assert response.status_code == 200
    live = b"".join(response.streaming_content)
    run = Run.objects.get()
    assert run.status == "completed"
    replayed = b"".join(client.get(events_url(run) + query).streaming_content)
    assert without_run_state(fmt, live) == without_run_state(fmt, replayed)
    # Every logged event is sent, in order, its id on the last message it made.
    ids = [i for i, _, _ in messages(live) if i is not None]
    logged = list(RunEvent.objects.filter(run=run).order_by("id").values_list("id", flat=True))
    assert sorted(set(ids)) == ids
    assert set(ids) <= set(logged)
    assert ids[-1] == logged[-1]


def test_a_reader_that_resumes_gets_what_followed(
    fmt: str, client: APIClient, conversation: Conversation
) -> None:
    run = ToolLoopService().send(conversation, TWO_CALLS)
    query = FORMATS[fmt][0]
    everything = messages(b"".join(client.get(events_url(run) + query).streaming_content))
    ids = [i for i, _, _ in everything if i is not None]
    middle = ids[len(ids) // 2]
    rest = messages(
        b"".join(
            client.get(events_url(run) + query, HTTP_LAST_EVENT_ID=str(middle)).streaming_content
        )
    )
    rest_ids = [i for i, _, _ in rest if i is not None]
    assert rest_ids == [i for i in ids if i > middle]
    # The end is the same whichever point a reader came back at.
    assert rest[-1] == everything[-1]


# The provider's stream is read on a thread of its own, which cancels the run.
@pytest.mark.django_db(transaction=True)
def test_a_run_cancelled_mid_reply_shows_exactly_the_text_it_keeps(
    fmt: str, client: APIClient, conversation: Conversation, settings: Any
) -> None:
    providers = {
        **API_SETTINGS["PROVIDERS"],
        "cancelled": {"BACKEND": "tests.api.fixtures.CancelledMidReply", "MODEL": "x"},
    }
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "PROVIDERS": providers}
    query, _, cancelled = FORMATS[fmt]
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/{query}",
        {"message": "hi", "stream": True, "provider": "cancelled"},
        format="json",
    )
    body = b"".join(response.streaming_content)
    kinds = [kind for _, kind, _ in messages(body)]
    assert cancelled in kinds
    *_, answer = load_messages(conversation)
    assert answer.role is Role.ASSISTANT
    assert shown_text(fmt, body) == answer.content == "before "
