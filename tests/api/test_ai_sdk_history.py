"""A chat that reloads: the history endpoint and the reconnect request, read by the AI SDK.

``GET chat/messages/`` must be the ``UIMessage[]`` the SDK itself rebuilt from
the streams (and pass its ``validateUIMessages``); ``GET chat/{id}/stream``
resumes an executing run as ``useChat({resume: true})`` does after a reload,
so the reloaded chat ends with the same message, and no model call repeats.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.conversations.attachments import create_attachment
from llm_conversations.models import Conversation, Run, RunStatus
from llm_conversations.runs import ToolLoopService
from llm_conversations.tools import tool
from tests.api import test_ai_sdk_node as node_sdk
from tests.api.conftest import API_SETTINGS, calls_text
from tests.conftest import requires_postgresql
from tests.support.attachment_files import image_bytes

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(node_sdk.MISSING is not None, reason=str(node_sdk.MISSING)),
]

gate = threading.Event()
working = threading.Event()


@tool
def wait_for_gate() -> str:
    """Works until the test opens the gate."""
    working.set()
    assert gate.wait(30)
    return "through"


@pytest.fixture(autouse=True)
def tools(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "TOOLS": [
            *API_SETTINGS["TOOLS"],
            "tests.support.loop_tools.fail",
            "tests.api.test_ai_sdk_history.wait_for_gate",
        ],
    }
    gate.clear()
    working.clear()


@pytest.fixture
def owner() -> User:
    return User.objects.create_user("nora", password="nora-pw")


def urls(live_server: Any, conversation: Conversation) -> dict[str, str]:
    api = f"{live_server.url}/api/conversations/{conversation.pk}/chat/"
    return {"api": api, "history": f"{api}messages/", "chatId": str(conversation.pk)}


@pytest.mark.parametrize(
    ("calls", "decide"),
    [
        ((("a", "get_weather", {"city": "Oslo"}), ("b", "get_time", {}), ("c", "fail", {})), None),
        ((("a", "get_weather", {"city": "Rome"}), ("d", "delete_file", {"path": "/x"})), "approve"),
        ((("d", "delete_file", {"path": "/x"}),), "deny"),
        ((("d", "delete_file", {"path": "/x"}),), None),  # left waiting for approval
    ],
    ids=["calls-and-an-error", "approved", "denied", "waiting"],
)
def test_the_history_is_the_message_the_sdk_rebuilt_from_the_streams(
    live_server: Any, owner: User, calls: Any, decide: str | None
) -> None:
    conversation = create_conversation(owner=owner)
    spec = {"mode": "chat", **urls(live_server, conversation), "text": calls_text(*calls)}
    if decide:
        spec["decide"] = decide
    result = node_sdk.run_node(spec)
    assert result["errors"] == []
    assert "historyError" not in result
    # The same messages with the same ids: the user turn keeps the id its client gave it.
    assert result["history"] == result["messages"]
    assert result["history"][1]["id"] == str(Run.objects.get().pk)


def test_a_stored_conversation_of_several_runs_reads_back_in_order(
    client: APIClient, user: User
) -> None:
    conversation = create_conversation(owner=user)
    service = ToolLoopService()
    first = service.send(conversation, "one")
    second = service.send(conversation, calls_text(("a", "get_time", {})))
    messages = client.get(f"/api/conversations/{conversation.pk}/chat/messages/").json()
    assert [(m["role"], m["id"]) for m in messages] == [
        ("user", str(conversation.messages.get(position=0).pk)),
        ("assistant", str(first.pk)),
        ("user", str(conversation.messages.get(position=2).pk)),
        ("assistant", str(second.pk)),
    ]
    assert [p["type"] for p in messages[3]["parts"]] == [
        "step-start",
        "tool-get_time",
        "step-start",
        "text",
    ]


def test_the_history_costs_the_same_queries_for_any_length(
    client: APIClient, user: User, django_assert_max_num_queries: Any
) -> None:
    conversation = create_conversation(owner=user)
    for n in range(30):
        ToolLoopService().send(conversation, calls_text((f"c{n}", "get_time", {})))
    with django_assert_max_num_queries(8):
        response = client.get(f"/api/conversations/{conversation.pk}/chat/messages/")
    assert len(response.json()) == 60


def test_another_users_history_and_stream_do_not_exist(client: APIClient, other_user: User) -> None:
    conversation = create_conversation(owner=other_user)
    base = f"/api/conversations/{conversation.pk}/chat/"
    for url in (f"{base}messages/", f"{base}{conversation.pk}/stream"):
        response = client.get(url)
        assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")


def test_nothing_to_resume_is_204_and_the_sdk_stays_ready(live_server: Any, owner: User) -> None:
    conversation = create_conversation(owner=owner)
    ToolLoopService().send(conversation, "hello")
    result = node_sdk.run_node({"mode": "resume", **urls(live_server, conversation)})
    assert result["errors"] == []
    assert result["status"] == "ready"
    assert [r["status"] for r in result["responses"]] == [204]
    assert result["messages"] == result["history"]


# A worker thread writes while the live server reads: SQLite's in-memory test
# database locks whole tables across threads, PostgreSQL does what production does.
@requires_postgresql
def test_a_reload_mid_run_resumes_the_stream_to_the_same_message(
    live_server: Any, owner: User
) -> None:
    conversation = create_conversation(owner=owner)
    service = ToolLoopService()
    run = service.start(conversation, calls_text(("g", "wait_for_gate", {})))

    def worker() -> None:
        try:
            service.execute(run.pk)
        finally:
            connections.close_all()

    executing = threading.Thread(target=worker)
    executing.start()
    try:
        assert working.wait(30)
        # The page reloads while the tool works; the gate opens once it has reconnected.
        threading.Timer(1.5, gate.set).start()
        result = node_sdk.run_node({"mode": "resume", **urls(live_server, conversation)})
    finally:
        gate.set()
        executing.join(30)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert result["errors"] == []
    node_sdk.assert_clean(result, responses=1)
    question, answer = result["messages"]
    assert question["role"] == "user"
    assert answer["id"] == str(run.pk)
    assert answer["parts"] == node_sdk.stored_parts(conversation)
    # One model round per turn: the resumed stream followed the log, repeating nothing.
    assert run.iterations == 2
    assert result["messages"] == result["history"]


def test_images_and_text_of_a_user_turn_are_its_parts_in_order(
    client: APIClient, user: User
) -> None:
    conversation = create_conversation(owner=user)
    data = image_bytes("PNG", (8, 8))
    attachment, _ = create_attachment(user, data, filename="dot.png")
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "attachment_id": str(attachment.pk)},
        ],
    }
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/", {"message": message}, format="json"
    )
    assert response.status_code == 201, response.json()
    question = client.get(f"/api/conversations/{conversation.pk}/chat/messages/").json()[0]
    url = f"http://testserver/api/attachments/{attachment.pk}/content/"
    assert question["parts"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "file", "mediaType": "image/png", "url": url, "filename": "dot.png"},
    ]
    assert b"".join(client.get(url).streaming_content) == data


def read_with_the_sdk(
    live_server: Any, conversation: Conversation, run: Run, **spec: Any
) -> dict[str, Any]:
    url = f"{live_server.url}/api/conversations/{conversation.pk}/runs/{run.pk}/events/"
    return node_sdk.run_node({"mode": "events", "url": f"{url}?format=ai-sdk", **spec})


def test_the_sdk_reads_a_failed_runs_stream(live_server: Any, owner: User) -> None:
    conversation = create_conversation(owner=owner)
    run = ToolLoopService().send(conversation, "hi", provider="broken")
    assert run.status == RunStatus.FAILED
    result = read_with_the_sdk(live_server, conversation, run, terminateOnError=False)
    # The SDK reports the error chunk as the stream's error: the failure is the answer.
    assert result["errors"] == [run.error_message]
    (response,) = result["responses"]
    assert (response["parseErrors"], response["done"]) == (0, True)
    assert [c["type"] for c in response["chunks"]] == ["start", "error", "finish"]


def test_the_sdk_reads_a_cancelled_runs_stream(live_server: Any, owner: User) -> None:
    conversation = create_conversation(owner=owner)
    service = ToolLoopService()
    run = service.cancel(service.start(conversation, "hi").pk)
    result = read_with_the_sdk(live_server, conversation, run)
    node_sdk.assert_clean(result, responses=1)
    chunks = result["responses"][0]["chunks"]
    assert [c["type"] for c in chunks] == ["start", "abort", "finish"]
    assert result["messages"][0]["metadata"]["status"] == "cancelled"
