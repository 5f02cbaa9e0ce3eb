"""Server-Sent Events: whole streamed runs, errors before streaming, disconnects, ASGI."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import AsyncClient
from rest_framework.test import APIClient

from llm_conversations.api.streams.events import EventsStream
from llm_conversations.api.streams.responses import AsyncRunStream, ExecutingStream
from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.messages import Role
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Conversation, Message, Run, RunStatus
from llm_conversations.runs import ToolLoopService
from tests.api.conftest import API_SETTINGS, calls_text, joined, parse_sse
from tests.support import loop_tools

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_gauge() -> None:
    loop_tools.gauge = loop_tools.Gauge()


def stream_run(client: APIClient, conversation: Conversation, **body: Any) -> Any:
    return client.post(
        f"/api/conversations/{conversation.pk}/runs/", {"stream": True, **body}, format="json"
    )


def assert_valid(conversation: Conversation) -> None:
    """Every call answered, no turn half stored."""
    assert check_sequence(load_messages(conversation)) == ()


def test_a_whole_streamed_run_with_tool_calls(
    client: APIClient, conversation: Conversation
) -> None:
    text = calls_text(("a", "get_weather", {"city": "Oslo"}), ("b", "get_time", {}))
    response = stream_run(client, conversation, message=text)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    assert response["Cache-Control"] == "no-cache"
    assert response["X-Accel-Buffering"] == "no"
    events = parse_sse(b"".join(response.streaming_content))
    names = [name for name, _ in events]
    assert joined(names, "text.delta") == [
        "run.running",  # the run's log, from its first event
        "message.stored",  # the assistant turn with two calls
        "tool_call.started",
        "tool_call.started",
        "tool_result.stored",
        "tool_result.stored",
        "text.delta",  # the echo backend's three pieces, in as many events as the log keeps
        "message.stored",
        "run.completed",
    ]
    assert 1 <= names.count("text.delta") <= 3
    assert events[0][1]["attempt"] == 1
    events = events[1:]  # from the first stored turn
    run = Run.objects.get()
    assert all(data["run_id"] == str(run.pk) for _, data in events)
    calls = events[0][1]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ['{"city":"Oslo"}', "{}"]
    assert events[1][1]["tool_call"]["function"]["name"] == "get_weather"
    result = events[3][1]["message"]
    assert (result["role"], result["tool_call_id"]) == ("tool", "a")
    # Stored events carry the stored rows' ids.
    stored_ids = {data["message"]["id"] for name, data in events if "stored" in name}
    assert stored_ids == {
        str(pk)
        for pk in Message.objects.filter(run=run).exclude(role="user").values_list("pk", flat=True)
    }
    text_reply = "".join(data["delta"] for name, data in events if name == "text.delta")
    assert (
        text_reply == events[-2][1]["message"]["content"] == load_messages(conversation)[-1].content
    )
    assert events[-1][1]["run"]["status"] == "completed"
    assert_valid(conversation)


def test_accept_header_asks_for_a_stream(client: APIClient, conversation: Conversation) -> None:
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": "hello"},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )
    events = parse_sse(b"".join(response.streaming_content))
    assert "".join(d["delta"] for n, d in events if n == "text.delta") == "hello"
    assert events[-1][0] == "run.completed"


def test_errors_before_the_stream_are_json(client: APIClient, conversation: Conversation) -> None:
    Run.objects.create(conversation=conversation, status=RunStatus.RUNNING)
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": "hi", "stream": True},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )
    assert response.status_code == 409
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "conversation_busy"
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": ""},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )
    assert (response.status_code, response["Content-Type"]) == (400, "application/json")


def test_a_paused_run_streams_requires_action_then_resumes_by_streamed_approval(
    client: APIClient, conversation: Conversation
) -> None:
    response = stream_run(
        client, conversation, message=calls_text(("d", "delete_file", {"path": "/x"}))
    )
    events = parse_sse(b"".join(response.streaming_content))
    assert [n for n, _ in events] == ["run.running", "message.stored", "run.requires_action"]
    run = events[-1][1]["run"]
    assert run["waiting_calls"][0]["reason"] == "requires_approval"
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/{run['id']}/approve/",
        {"stream": True},
        format="json",
    )
    events = parse_sse(b"".join(response.streaming_content))
    assert [n for n, _ in events][:3] == ["run.running", "tool_call.started", "tool_result.stored"]
    assert events[-1][0] == "run.completed"
    assert loop_tools.gauge.calls == ["delete_file:/x"]


def test_streamed_submit_tool_outputs(client: APIClient, conversation: Conversation) -> None:
    run = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": calls_text(("p", "pick_color", {"prompt": "Pick"}))},
        format="json",
    ).json()
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/{run['id']}/submit_tool_outputs/",
        {"tool_outputs": [{"tool_call_id": "p", "output": "teal"}], "stream": True},
        format="json",
    )
    events = parse_sse(b"".join(response.streaming_content))
    assert events[-1][0] == "run.completed"
    assert "teal" in events[-2][1]["message"]["content"]


def test_a_provider_failure_ends_the_stream_with_run_failed(
    client: APIClient, conversation: Conversation
) -> None:
    response = stream_run(client, conversation, message="hi", provider="broken")
    events = parse_sse(b"".join(response.streaming_content))
    assert [n for n, _ in events] == ["run.running", "run.failed"]
    assert events[-1][1]["run"]["error"]["type"] == "ProviderUnavailableError"
    assert events[-1][1]["run"]["termination_reason"] == "provider_error"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("events_read", [0, 1])
def test_a_client_that_disconnects_leaves_the_run_finished(events_read: int) -> None:
    # Transactional: closing the response fires request_finished, which
    # closes the database connection as a real server would.
    user = User.objects.create_user("dora")
    conversation = create_conversation(owner=user)
    client = APIClient()
    client.force_authenticate(user)
    response = stream_run(
        client,
        conversation,
        message=calls_text(("a", "get_weather", {"city": "Rome"}), ("b", "get_time", {})),
    )
    iterator = iter(response.streaming_content)
    first = [next(iterator) for _ in range(events_read)]
    if first:
        assert first[0].startswith(b"id: ")
        assert b"\nevent: run.running\n" in first[0]
    response.close()  # what a WSGI server does when the client has gone
    run = Run.objects.get()
    assert (run.status, run.termination_reason) == ("completed", "completed")
    assert [m.role for m in load_messages(conversation)] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert_valid(conversation)


def test_asgi_requests_stream_through_an_async_iterator(
    user: User, conversation: Conversation
) -> None:
    async def scenario() -> tuple[bool, bytes]:
        client = AsyncClient()
        await client.aforce_login(user)
        response = await client.post(
            f"/api/conversations/{conversation.pk}/runs/",
            json.dumps({"message": calls_text(("b", "get_time", {})), "stream": True}),
            content_type="application/json",
        )
        chunks = [chunk async for chunk in response.streaming_content]
        return response.is_async, b"".join(chunks)

    is_async, body = async_to_sync(scenario)()
    assert is_async
    events = parse_sse(body)
    assert events[-1][0] == "run.completed"
    assert Run.objects.get().status == "completed"
    assert_valid(conversation)


def test_asgi_stream_closed_early_finishes_the_run(conversation: Conversation) -> None:
    service = ToolLoopService()
    run = service.start(
        conversation, {"role": "user", "content": calls_text(("b", "get_time", {}))}
    )

    async def read_one_then_close() -> bytes:
        iterator = aiter(AsyncRunStream(ExecutingStream(service, run, EventsStream(run.pk))))
        first = await anext(iterator)
        await iterator.aclose()  # Django's ASGI handler closes it when the client leaves
        return first

    assert b"\nevent: run.running\n" in async_to_sync(read_one_then_close)()
    run.refresh_from_db()
    assert run.status == "completed"
    assert_valid(conversation)


# Transactional: the provider cancels the run from its stream's own thread.
@pytest.mark.django_db(transaction=True)
def test_a_run_cancelled_mid_reply_sends_nothing_after_run_cancelled(
    client: APIClient,
    conversation: Conversation,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    providers = {
        **API_SETTINGS["PROVIDERS"],
        "cancelled": {"BACKEND": "tests.api.fixtures.CancelledMidReply", "MODEL": "x"},
    }
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "PROVIDERS": providers}
    response = stream_run(client, conversation, message="hi", provider="cancelled")
    events = parse_sse(b"".join(response.streaming_content))
    # Text is sent once written to the run's log, which a cancelled run refuses:
    # nothing of the reply after the cancel reaches the client.
    names = [name for name, _ in events]
    assert names == ["run.running", "text.delta", "message.stored", "run.cancelled"]
    shown = "".join(data["delta"] for name, data in events if name == "text.delta")
    assert shown == "before "
    assert events[-1][1]["run"]["status"] == "cancelled"
    assert_valid(conversation)
    # The cancel keeps exactly the text the stream showed, as the run's answer.
    *_, answer = load_messages(conversation)
    assert (answer.role, answer.content) == (Role.ASSISTANT, shown)
    assert events[2][1]["message"]["content"] == shown
