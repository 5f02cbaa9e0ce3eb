"""AG-UI's events as a format of run streams (``?format=ag-ui``), read in process."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connection
from django.test import AsyncClient
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from llm_conversations.api.streams.ag_ui import AgUiStream
from llm_conversations.models import Conversation, Message, Run, RunEvent
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.log.reader import Page
from tests.api.conftest import API_SETTINGS, calls_text, joined

pytestmark = pytest.mark.django_db

Event = tuple[int | None, Any]


def parse_events(response: Any) -> list[Event]:
    """``(id, event)`` of every SSE message of an AG-UI stream, strictly."""
    assert response["Content-Type"] == "text/event-stream"
    text = b"".join(response.streaming_content).decode()
    blocks = text.split("\n\n")
    assert blocks[-1] == "", text[-200:]
    events: list[Event] = []
    for block in blocks[:-1]:
        lines = block.split("\n")
        if lines == [": keep-alive"]:
            continue
        event_id = int(lines.pop(0).removeprefix("id: ")) if lines[0].startswith("id: ") else None
        assert len(lines) == 1, block
        assert lines[0].startswith("data: "), block
        events.append((event_id, json.loads(lines[0].removeprefix("data: "))))
    return events


def types(events: list[Event]) -> list[str]:
    return [event["type"] for _, event in events]


def start_run(client: APIClient, conversation: Conversation, **body: Any) -> Any:
    url = f"/api/conversations/{conversation.pk}/runs/?format=ag-ui"
    return client.post(url, body, format="json")


def test_a_reply_streams_as_one_text_message_between_run_started_and_finished(
    client: APIClient, conversation: Conversation
) -> None:
    events = parse_events(start_run(client, conversation, message="hello"))
    run = Run.objects.get()
    stored = Message.objects.filter(role="assistant").get()
    assert joined(types(events), "TEXT_MESSAGE_CONTENT") == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    ids = {"threadId": str(conversation.pk), "runId": str(run.pk)}
    assert events[0][1] == {"type": "RUN_STARTED", **ids}
    assert events[1][1]["snapshot"] == {"run_id": str(run.pk), "status": "running", "attempt": 1}
    message_id = events[2][1]["messageId"]
    assert events[2][1] == {
        "type": "TEXT_MESSAGE_START",
        "messageId": message_id,
        "role": "assistant",
    }
    shown = "".join(d["delta"] for _, d in events if d["type"] == "TEXT_MESSAGE_CONTENT")
    assert shown == "hello" == stored.content
    # The streamed message names the turn it was stored as.
    (end,) = [d for _, d in events if d["type"] == "TEXT_MESSAGE_END"]
    assert end["metadata"] == {"llm_conversations": {"message_id": str(stored.pk)}}
    assert events[-1][1] == {
        "type": "RUN_FINISHED",
        **ids,
        "outcome": {"type": "success"},
        "result": {"status": "completed", "termination_reason": "completed"},
    }


def test_calls_and_results_carry_the_stored_ids(
    client: APIClient, conversation: Conversation
) -> None:
    text = calls_text(("a", "get_weather", {"city": "Oslo"}), ("b", "get_time", {}))
    events = parse_events(start_run(client, conversation, message=text))
    turn = Message.objects.filter(role="assistant").order_by("position").first()
    assert turn is not None
    results = {m.tool_call_id: m for m in Message.objects.filter(role="tool")}
    calls = [event for _, event in events if event["type"].startswith("TOOL_CALL")]
    assert [event["type"] for event in calls] == [
        *("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END") * 2,
        "TOOL_CALL_RESULT",
        "TOOL_CALL_RESULT",
    ]
    assert calls[0] == {
        "type": "TOOL_CALL_START",
        "toolCallId": "a",
        "toolCallName": "get_weather",
        "parentMessageId": str(turn.pk),
    }
    assert json.loads(calls[1]["delta"]) == {"city": "Oslo"}
    assert calls[6] == {
        "type": "TOOL_CALL_RESULT",
        "messageId": str(results["a"].pk),
        "toolCallId": "a",
        "content": results["a"].content,
        "role": "tool",
    }


def test_a_paused_run_finishes_with_an_interrupt_per_waiting_call(
    client: APIClient, conversation: Conversation
) -> None:
    text = calls_text(("d", "delete_file", {"path": "/x"}), ("p", "pick_color", {"prompt": "?"}))
    events = parse_events(start_run(client, conversation, message=text))
    assert events[-2][1]["snapshot"]["status"] == "requires_action"
    assert events[-1][1]["outcome"] == {
        "type": "interrupt",
        "interrupts": [
            {"id": "d", "reason": "requires_approval", "toolCallId": "d"},
            {"id": "p", "reason": "client_side", "toolCallId": "p"},
        ],
    }


def test_a_failed_run_ends_with_run_error(client: APIClient, conversation: Conversation) -> None:
    events = parse_events(start_run(client, conversation, message="hi", provider="broken"))
    run = Run.objects.get()
    assert types(events) == ["RUN_STARTED", "STATE_SNAPSHOT", "STATE_SNAPSHOT", "RUN_ERROR"]
    assert events[-1][1] == {
        "type": "RUN_ERROR",
        "message": run.error_message,
        "code": run.error_type,
    }


# Transactional: the provider cancels the run from its stream's own thread.
@pytest.mark.django_db(transaction=True)
def test_a_cancelled_run_finishes_with_a_cancelled_outcome(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    providers = {
        **API_SETTINGS["PROVIDERS"],
        "cancelled": {"BACKEND": "tests.api.fixtures.CancelledMidReply", "MODEL": "x"},
    }
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "PROVIDERS": providers}
    events = parse_events(start_run(client, conversation, message="hi", provider="cancelled"))
    names = types(events)
    assert names[-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"], names
    # Text sent before the cancel is closed before the run ends.
    assert names.count("TEXT_MESSAGE_START") == names.count("TEXT_MESSAGE_END")
    assert events[-1][1]["outcome"] == {"type": "cancelled"}


def test_resuming_after_any_event_id_continues_the_same_events(
    client: APIClient, conversation: Conversation
) -> None:
    text = calls_text(("a", "get_weather", {"city": "Oslo"}), ("b", "get_time", {}))
    full = parse_events(start_run(client, conversation, message=text))
    run = Run.objects.get()
    url = f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/?format=ag-ui"
    assert parse_events(client.get(url)) == full  # the log reads back as it streamed
    ids = [event_id for event_id, _ in full if event_id is not None]
    assert len(ids) >= 5
    for index, (event_id, _) in enumerate(full):
        if event_id is None or event_id == ids[-1]:
            continue
        resumed = parse_events(client.get(url, HTTP_LAST_EVENT_ID=str(event_id)))
        # A new response starts the run again, then goes on where the last one stopped.
        assert resumed[0][1] == full[0][1], event_id
        rest = resumed[1:]
        if rest[0] != full[index + 1] and rest[0][1]["type"] == "TEXT_MESSAGE_START":
            rest = rest[1:]  # the open message, announced again (the next test)
        assert rest == full[index + 1 :], event_id


def test_resuming_inside_a_text_message_opens_it_again(
    client: APIClient, conversation: Conversation
) -> None:
    full = parse_events(start_run(client, conversation, message="hello"))
    run = Run.objects.get()
    start = next(event for _, event in full if event["type"] == "TEXT_MESSAGE_START")
    *_, delta_id = (i for i, event in full if event["type"] == "TEXT_MESSAGE_CONTENT")
    url = f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/?format=ag-ui"
    resumed = parse_events(client.get(url, HTTP_LAST_EVENT_ID=str(delta_id)))
    assert types(resumed)[:3] == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_END"]
    assert resumed[1][1] == start  # the same message, announced again for this response


def test_reading_a_log_costs_the_queries_of_the_default_format(
    client: APIClient, conversation: Conversation
) -> None:
    text = calls_text(("a", "get_weather", {"city": "Oslo"}), ("b", "get_time", {}))
    parse_events(start_run(client, conversation, message=text))
    run = Run.objects.get()
    url = f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/"
    counts = []
    for query in ("", "?format=ag-ui"):
        with CaptureQueriesContext(connection) as queries:
            b"".join(client.get(url + query).streaming_content)
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_resuming_costs_one_query_more_than_the_default_format(
    client: APIClient, conversation: Conversation
) -> None:
    text = calls_text(("a", "get_weather", {"city": "Oslo"}))
    full = parse_events(start_run(client, conversation, message=text))
    run = Run.objects.get()
    url = f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/"
    after = str(next(event_id for event_id, _ in full if event_id is not None))
    counts = []
    for query in ("", "?format=ag-ui"):
        with CaptureQueriesContext(connection) as queries:
            b"".join(client.get(url + query, HTTP_LAST_EVENT_ID=after).streaming_content)
        counts.append(len(queries))
    # The types of the events already sent, read once to know the open message.
    assert counts[1] == counts[0] + 1


@pytest.mark.django_db(transaction=True)
def test_an_asgi_reader_gets_the_same_events_and_resumes_after_the_last(user: User) -> None:
    conversation = Conversation.objects.create(owner=user)
    run = ToolLoopService().start(conversation, calls_text(("a", "get_weather", {})))
    ToolLoopService().execute(run.pk)
    url = f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/?format=ag-ui"

    async def read(**headers: str) -> tuple[bool, bytes]:
        client = AsyncClient()
        await client.aforce_login(user)
        response = await client.get(url, headers=headers)
        return response.is_async, b"".join([chunk async for chunk in response.streaming_content])

    class Response(dict[str, str]):
        def __init__(self, body: bytes) -> None:
            super().__init__({"Content-Type": "text/event-stream"})
            self.streaming_content = [body]

    is_async, body = async_to_sync(read)()
    assert is_async
    events = parse_events(Response(body))
    assert types(events)[-1] == "RUN_FINISHED"
    last = max(event_id for event_id, _ in events if event_id is not None)
    # Nothing is left after the last event: the run is started and finished again, empty,
    # in its own thread (no query on the event loop).
    _, rest = async_to_sync(read)(last_event_id=str(last))
    assert [event for _, event in parse_events(Response(rest))] == [
        {"type": "RUN_STARTED", "threadId": str(conversation.pk), "runId": str(run.pk)},
        {"type": "RUN_FINISHED", "threadId": str(conversation.pk), "runId": str(run.pk)},
    ]


def test_the_end_of_a_resumed_response_reads_nothing(
    client: APIClient, conversation: Conversation, django_assert_num_queries: Any
) -> None:
    # Under ASGI the end is rendered on the event loop, where no query may run (here: a
    # stream that stopped after its first event, as when its run is gone).
    full = parse_events(start_run(client, conversation, message="hello"))
    run = Run.objects.get()
    stream = AgUiStream(run.pk)
    stream.prime(min(event_id for event_id, _ in full if event_id is not None))
    with django_assert_num_queries(0):
        body = stream.end()
    assert json.loads(body.split(b"\n")[0].removeprefix(b"data: "))["threadId"] == str(
        conversation.pk
    )


def test_errors_before_the_stream_stay_json(client: APIClient, conversation: Conversation) -> None:
    response = start_run(client, conversation, message="hi", provider="nope")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert "code" in json.dumps(response.json())


def test_a_tools_progress_report_is_a_custom_event(conversation: Conversation) -> None:
    run = Run.objects.create(conversation=conversation, status="running")
    report = {"tool_call_id": "a", "text": "Half way", "fraction": 0.5}
    logged = RunEvent(id=7, run=run, type="tool_call.progress", data=report)
    stream = AgUiStream(run.pk)
    stream.started = True  # only this event's rendering is looked at
    body = stream.render(Page(run=run, events=[logged]))
    assert body == (
        b"id: 7\ndata: "
        + json.dumps(
            {"type": "CUSTOM", "name": "llm_conversations.tool_call.progress", "value": report},
            separators=(",", ":"),
        ).encode()
        + b"\n\n"
    )
