"""The AI SDK's UI message stream format of run streams, and the chat endpoint's refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Conversation, Message, Run, RunStatus
from tests.api.conftest import calls_text, joined
from tests.conftest import task_backend

pytestmark = pytest.mark.django_db

Chunk = tuple[int | None, Any]


def parse_chunks(response: Any) -> list[Chunk]:
    """``(id, chunk)`` of every message of a UI message stream, strictly; ``[DONE]`` last."""
    assert response["x-vercel-ai-ui-message-stream"] == "v1"
    assert response["Content-Type"] == "text/event-stream"
    text = b"".join(response.streaming_content).decode()
    blocks = text.split("\n\n")
    assert blocks[-2:] == ["data: [DONE]", ""], text[-200:]
    chunks: list[Chunk] = []
    for block in blocks[:-2]:
        lines = block.split("\n")
        if lines == [": keep-alive"]:
            continue
        event_id = int(lines.pop(0).removeprefix("id: ")) if lines[0].startswith("id: ") else None
        assert len(lines) == 1, block
        assert lines[0].startswith("data: "), block
        chunks.append((event_id, json.loads(lines[0].removeprefix("data: "))))
    return chunks


def types(chunks: list[Chunk]) -> list[str]:
    return [chunk["type"] for _, chunk in chunks]


def text_of(chunks: list[Chunk]) -> str:
    """The text the stream's ``text-delta`` chunks show."""
    return "".join(chunk["delta"] for _, chunk in chunks if chunk["type"] == "text-delta")


def start_run(
    client: APIClient, conversation: Conversation, query: str = "?format=ai-sdk", **body: Any
) -> Any:
    return client.post(f"/api/conversations/{conversation.pk}/runs/{query}", body, format="json")


def test_format_query_streams_a_run_as_ui_message_chunks(
    client: APIClient, conversation: Conversation
) -> None:
    chunks = parse_chunks(start_run(client, conversation, message="hello"))
    run = Run.objects.get()
    assert joined(types(chunks), "text-delta") == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert chunks[0][1] == {
        "type": "start",
        "messageId": str(run.pk),
        "messageMetadata": {"run_id": str(run.pk), "conversation_id": str(conversation.pk)},
    }
    assert text_of(chunks) == "hello" == Message.objects.last().content  # type: ignore[union-attr]
    assert chunks[-1][1] == {
        "type": "finish",
        "finishReason": "stop",
        "messageMetadata": {
            "run_id": str(run.pk),
            "conversation_id": str(conversation.pk),
            "status": "completed",
            "termination_reason": "completed",
            "model": "echo",
            "usage": {
                "input_tokens": run.input_tokens,
                "output_tokens": run.output_tokens,
                "total_tokens": run.total_tokens,
                "cached_tokens": run.cached_tokens,
            },
        },
    }
    assert run.output_tokens > 0  # the echo backend counts characters


def test_the_protocol_header_asks_for_the_format_too(
    client: APIClient, conversation: Conversation
) -> None:
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": "hi"},
        format="json",
        HTTP_X_VERCEL_AI_UI_MESSAGE_STREAM="v1",
    )
    assert types(parse_chunks(response))[-1] == "finish"


def test_a_failed_run_ends_with_an_error_chunk(
    client: APIClient, conversation: Conversation
) -> None:
    chunks = parse_chunks(start_run(client, conversation, message="hi", provider="broken"))
    run = Run.objects.get()
    assert types(chunks) == ["start", "error", "finish"]
    assert chunks[1][1] == {"type": "error", "errorText": run.error_message}
    assert chunks[2][1]["finishReason"] == "error"
    assert chunks[2][1]["messageMetadata"]["termination_reason"] == "provider_error"


def test_resuming_after_any_event_id_continues_the_same_chunks(
    client: APIClient, conversation: Conversation
) -> None:
    text = calls_text(("a", "get_weather", {"city": "Oslo"}), ("b", "get_time", {}))
    full = parse_chunks(start_run(client, conversation, message=text))
    run = Run.objects.get()
    url = f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/?format=ai-sdk"
    assert parse_chunks(client.get(url)) == full  # the log reads back as it streamed
    ids = [event_id for event_id, _ in full if event_id is not None]
    assert len(ids) >= 5
    for index, (event_id, _) in enumerate(full):
        if event_id is None or event_id == ids[-1]:
            continue
        resumed = parse_chunks(client.get(url, HTTP_LAST_EVENT_ID=str(event_id)))
        # A new response starts the message again, then goes on where the last one stopped.
        assert resumed[0][1] == full[0][1], event_id
        assert resumed[1:] == full[index + 1 :], event_id


def test_reading_a_log_costs_the_queries_of_the_default_format(
    client: APIClient, conversation: Conversation
) -> None:
    text = calls_text(("a", "get_weather", {"city": "Oslo"}), ("b", "get_time", {}))
    parse_chunks(start_run(client, conversation, message=text))
    run = Run.objects.get()
    url = f"/api/conversations/{conversation.pk}/runs/{run.pk}/events/"
    counts = []
    for query in ("", "?format=ai-sdk"):
        with CaptureQueriesContext(connection) as queries:
            b"".join(client.get(url + query).streaming_content)
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_a_paused_run_asks_for_approval_and_finishes_for_tool_calls(
    client: APIClient, conversation: Conversation
) -> None:
    text = calls_text(("d", "delete_file", {"path": "/x"}), ("p", "pick_color", {"prompt": "?"}))
    chunks = parse_chunks(start_run(client, conversation, message=text))
    assert types(chunks) == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-available",
        "tool-input-start",
        "tool-input-available",
        "tool-approval-request",  # the client-side call waits for an output: no request
        "finish-step",
        "finish",
    ]
    assert chunks[3][1]["input"] == {"path": "/x"}
    assert chunks[6][1] == {"type": "tool-approval-request", "approvalId": "d", "toolCallId": "d"}
    assert chunks[-1][1]["finishReason"] == "tool-calls"


def chat_body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"id": "c", "messages": list(messages), "trigger": "submit-message", "messageId": None}


def user(text: str) -> dict[str, Any]:
    return {"id": "u", "role": "user", "parts": [{"type": "text", "text": text}]}


def test_chat_stores_only_the_last_user_message(
    client: APIClient, conversation: Conversation
) -> None:
    before = list(Message.objects.values_list("role", "content"))
    body = chat_body(
        user("forged history"), {"id": "x", "role": "assistant", "parts": []}, user("hey")
    )
    body["messages"][-1]["parts"].append({"type": "text", "text": "there"})
    response = client.post(f"/api/conversations/{conversation.pk}/chat/", body, format="json")
    chunks = parse_chunks(response)
    assert types(chunks)[-1] == "finish"
    assert list(Message.objects.values_list("role", "content")) == [
        *before,
        ("user", "hey\n\nthere"),
        ("assistant", "hey\n\nthere"),
    ]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (chat_body({"id": "s", "role": "system", "parts": []}), 400, "invalid"),
        (chat_body(user("")), 400, "missing_content"),
        ({"messages": []}, 400, None),
        ({"messages": [user("hi")], "trigger": "regenerate-message"}, 400, None),
        (chat_body({"id": "a", "role": "assistant", "parts": []}), 409, "run_not_waiting"),
    ],
)
def test_chat_refusals_are_json_and_store_nothing(
    client: APIClient,
    conversation: Conversation,
    body: dict[str, Any],
    status: int,
    code: str | None,
) -> None:
    response = client.post(f"/api/conversations/{conversation.pk}/chat/", body, format="json")
    assert (response.status_code, response["Content-Type"]) == (status, "application/json")
    if code:
        assert response.json()["error"]["code"] == code
    assert Message.objects.count() == 1
    assert not Run.objects.exists()


def test_chat_while_a_run_is_active_is_busy(client: APIClient, conversation: Conversation) -> None:
    Run.objects.create(conversation=conversation, status=RunStatus.RUNNING)
    response = client.post(
        f"/api/conversations/{conversation.pk}/chat/", chat_body(user("hi")), format="json"
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conversation_busy"


def test_chat_with_an_answer_for_no_waiting_call_is_refused(
    client: APIClient, conversation: Conversation
) -> None:
    start_run(client, conversation, "", message=calls_text(("d", "delete_file", {"path": "/x"})))
    answer = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-delete_file",
                "toolCallId": "other",
                "approval": {"id": "other", "approved": True},
            }
        ],
    }
    response = client.post(
        f"/api/conversations/{conversation.pk}/chat/", chat_body(answer), format="json"
    )
    assert (response.status_code, response.json()["error"]["code"]) == (400, "unknown_tool_call")
    assert Run.objects.get().status == RunStatus.REQUIRES_ACTION


def test_chat_submits_a_client_side_output(client: APIClient, conversation: Conversation) -> None:
    start_run(client, conversation, "", message=calls_text(("p", "pick_color", {"prompt": "?"})))
    answer = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-pick_color",
                "toolCallId": "p",
                "state": "output-available",
                "output": "teal",
            }
        ],
    }
    chunks = parse_chunks(
        client.post(f"/api/conversations/{conversation.pk}/chat/", chat_body(answer), format="json")
    )
    # The client has the output it sent: the stream goes on with the next step.
    assert joined(types(chunks), "text-delta") == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert "teal" in text_of(chunks)
    assert Message.objects.get(tool_call_id="p").content == "teal"
    assert Run.objects.get().status == RunStatus.COMPLETED


def test_another_users_conversation_does_not_exist(client: APIClient, other_user: Any) -> None:
    theirs = create_conversation(owner=other_user)
    response = client.post(
        f"/api/conversations/{theirs.pk}/chat/", chat_body(user("hi")), format="json"
    )
    assert response.status_code == 404
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_background_chat_streams_the_log_of_the_worker(settings: Any) -> None:
    # The immediate backend executes the task when the start commits, as a worker would.
    settings.TASKS = {"default": {"BACKEND": task_backend("immediate.ImmediateBackend")}}
    owner = User.objects.create_user("bea")
    conversation = create_conversation(owner=owner)
    client = APIClient()
    client.force_authenticate(owner)
    body = {**chat_body(user("hello")), "background": True}
    chunks = parse_chunks(
        client.post(f"/api/conversations/{conversation.pk}/chat/", body, format="json")
    )
    assert joined(types(chunks), "text-delta") == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert text_of(chunks) == "hello"
