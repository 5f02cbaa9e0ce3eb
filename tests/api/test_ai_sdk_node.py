"""The AI SDK itself (``ai`` on the npm registry, pinned in tests/package.json) reads
this API's UI message streams from a live server, and rebuilds the stored turns."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from typing import Any

import pytest
from django.contrib.auth.models import User

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Conversation, Message, Run
from tests.api.conftest import API_SETTINGS, calls_text
from tests.browser.chromium import running_under_ci
from tests.support.node_scripts import INSTALL_HINT, NODE_MODULES, SCRIPTS

SCRIPT = SCRIPTS / "ui_message.mjs"
NODE = shutil.which("node")


def _missing() -> str | None:
    if NODE is None:
        return "node is not installed"
    if not (NODE_MODULES / "ai").is_dir():
        return f"the AI SDK is not in tests/node_modules: {INSTALL_HINT}"
    return None


MISSING = _missing()
if MISSING and running_under_ci(os.environ):
    # Under CI the Node test may not be skipped: `make install` installs it.
    raise RuntimeError(f"{MISSING}. CI=true: the AI SDK test may not be skipped.")

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(MISSING is not None, reason=f"{MISSING} (CI=true fails instead)"),
]


@pytest.fixture(autouse=True)
def failing_tool(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "TOOLS": [*API_SETTINGS["TOOLS"], "tests.support.loop_tools.fail"],
    }


@pytest.fixture
def owner() -> User:
    return User.objects.create_user("nora", password="nora-pw")


def run_node(spec: dict[str, Any]) -> dict[str, Any]:
    auth = base64.b64encode(b"nora:nora-pw").decode()
    completed = subprocess.run(
        [str(NODE), str(SCRIPT), json.dumps({"authorization": f"Basic {auth}", **spec})],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def stored_parts(conversation: Conversation, approved: tuple[str, ...] = ()) -> list[Any]:
    """The parts a UI message of the conversation's last run must hold, from the stored turns:
    per assistant turn a step, its text, its calls with their inputs and results."""
    rows = list(
        Message.objects.filter(
            run=Run.objects.filter(conversation=conversation).latest("created_at")
        )
        .exclude(role="user")
        .order_by("position")
    )
    results = {row.tool_call_id: row for row in rows if row.role == "tool"}
    parts: list[Any] = []
    for row in rows:
        if row.role != "assistant":
            continue
        parts.append({"type": "step-start"})
        if row.content:
            parts.append({"type": "text", "text": row.content, "state": "done"})
        for call in row.tool_calls or []:
            result = results[call["id"]]
            part: dict[str, Any] = {
                "type": f"tool-{call['function']['name']}",
                "toolCallId": call["id"],
                "input": call["function"]["arguments"],
            }
            if result.is_error:
                part.update(state="output-error", errorText=result.content)
            else:
                part.update(state="output-available", output=result.content)
            if call["id"] in approved:
                part["approval"] = {"id": call["id"], "approved": True}
            parts.append(part)
    return parts


def assert_clean(result: dict[str, Any], responses: int) -> None:
    """Every response is the protocol's, parsed whole by the SDK, ended by ``[DONE]``."""
    assert result["errors"] == []
    assert result["status"] == "ready"
    assert len(result["responses"]) == responses
    for response in result["responses"]:
        assert (response["status"], response["protocol"]) == (200, "v1")
        assert response["contentType"] == "text/event-stream"
        assert response["parseErrors"] == 0
        assert response["done"] is True
        assert response["chunks"][0]["type"] == "start"
        assert response["chunks"][-1]["type"] == "finish"


def chat(live_server: Any, conversation: Conversation, text: str, **spec: Any) -> dict[str, Any]:
    return run_node(
        {
            "mode": "chat",
            "api": f"{live_server.url}/api/conversations/{conversation.pk}/chat/",
            "chatId": str(conversation.pk),
            "text": text,
            **spec,
        }
    )


def test_use_chat_rebuilds_parallel_calls_a_tool_error_and_the_answer(
    live_server: Any, owner: User
) -> None:
    conversation = create_conversation(owner=owner)
    text = calls_text(
        ("a", "get_weather", {"city": "Oslo"}), ("b", "get_time", {}), ("c", "fail", {})
    )
    result = chat(live_server, conversation, text)
    assert_clean(result, responses=1)
    question, answer = result["messages"]
    assert question["parts"] == [{"type": "text", "text": text}]
    run = Run.objects.get()
    assert answer["id"] == str(run.pk)
    assert answer["metadata"] == {
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
    }
    parts = stored_parts(conversation)
    assert answer["parts"] == parts
    # Three calls in one step, one of them failed, then the answer in a second step.
    assert [p["type"] for p in parts] == [
        "step-start",
        "tool-get_weather",
        "tool-get_time",
        "tool-fail",
        "step-start",
        "text",
    ]
    assert parts[3]["state"] == "output-error"
    assert result["responses"][0]["chunks"][-1]["finishReason"] == "stop"


def test_use_chat_pauses_for_approval_and_resumes_when_approved(
    live_server: Any, owner: User
) -> None:
    conversation = create_conversation(owner=owner)
    text = calls_text(("a", "get_weather", {"city": "Rome"}), ("d", "delete_file", {"path": "/x"}))
    result = chat(live_server, conversation, text, decide="approve")
    assert_clean(result, responses=2)
    paused, resumed = (response["chunks"] for response in result["responses"])
    assert {"type": "tool-approval-request", "approvalId": "d", "toolCallId": "d"} in paused
    assert paused[-1]["finishReason"] == "tool-calls"
    assert paused[-1]["messageMetadata"]["status"] == "requires_action"
    assert resumed[0]["messageId"] == paused[0]["messageId"]  # one UI message
    _, answer = result["messages"]
    assert answer["parts"] == stored_parts(conversation, approved=("d",))
    assert answer["metadata"]["status"] == "completed"
    # Two messages: the client's history is not stored again.
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1


def test_the_events_of_a_run_read_back_as_the_same_message(live_server: Any, owner: User) -> None:
    conversation = create_conversation(owner=owner)
    text = calls_text(("a", "get_weather", {"city": "Oslo"}), ("c", "fail", {}))
    chat(live_server, conversation, text)
    run = Run.objects.get()
    result = run_node(
        {
            "mode": "events",
            "url": f"{live_server.url}/api/conversations/{conversation.pk}/runs/{run.pk}"
            "/events/?format=ai-sdk",
        }
    )
    assert_clean(result, responses=1)
    assert result["messages"][0]["parts"] == stored_parts(conversation)
