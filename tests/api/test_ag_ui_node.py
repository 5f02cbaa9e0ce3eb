"""AG-UI's own packages (``@ag-ui/core`` and ``@ag-ui/client`` on the npm registry, pinned
in tests/package.json) read this API's AG-UI streams from a live server: every
event parses with the protocol's schema, the client's verifier accepts their order,
and its HTTP agent rebuilds the stored turns."""

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
from llm_conversations.runs import ToolLoopService
from tests.api.conftest import API_SETTINGS, calls_text, joined
from tests.browser.chromium import running_under_ci
from tests.support.node_scripts import INSTALL_HINT, NODE_MODULES, SCRIPTS

SCRIPT = SCRIPTS / "ag_ui_events.mjs"
NODE = shutil.which("node")


def _missing() -> str | None:
    if NODE is None:
        return "node is not installed"
    if not (NODE_MODULES / "@ag-ui" / "client").is_dir():
        return f"AG-UI's client is not in tests/node_modules: {INSTALL_HINT}"
    return None


MISSING = _missing()
if MISSING and running_under_ci(os.environ):
    # Under CI the Node test may not be skipped: `make install` installs it.
    raise RuntimeError(f"{MISSING}. CI=true: the AG-UI test may not be skipped.")

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(MISSING is not None, reason=f"{MISSING} (CI=true fails instead)"),
]


@pytest.fixture(autouse=True)
def providers(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "PROVIDERS": {
            **API_SETTINGS["PROVIDERS"],
            "cancelled": {"BACKEND": "tests.api.fixtures.CancelledMidReply", "MODEL": "x"},
        },
        "TOOLS": [*API_SETTINGS["TOOLS"], "tests.support.loop_tools.fail"],
    }


@pytest.fixture
def owner() -> User:
    return User.objects.create_user("nora", password="nora-pw")


def read(live_server: Any, run: Run, last_event_id: int | None = None) -> dict[str, Any]:
    """What AG-UI's packages make of the run's events (from ``last_event_id``)."""
    auth = base64.b64encode(b"nora:nora-pw").decode()
    spec: dict[str, Any] = {
        "authorization": f"Basic {auth}",
        "url": f"{live_server.url}/api/conversations/{run.conversation_id}/runs/{run.pk}"
        "/events/?format=ag-ui",
        "threadId": str(run.conversation_id),
        "runId": str(run.pk),
    }
    if last_event_id is not None:
        spec["lastEventId"] = last_event_id
    completed = subprocess.run(
        [str(NODE), str(SCRIPT), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout)
    assert (result["status"], result["contentType"]) == (200, "text/event-stream")
    assert result["invalid"] == []
    assert result["verifyError"] is None
    assert result["agentError"] is None
    assert result["events"][0] == {
        "type": "RUN_STARTED",
        "threadId": str(run.conversation_id),
        "runId": str(run.pk),
    }
    return result


def execute(run: Run) -> None:
    """Execute the run, streaming (its text is logged as deltas)."""
    for _ in ToolLoopService().events(run.pk):
        pass
    run.refresh_from_db()


def run_of(owner: User, text: str, provider: str = "echo") -> Run:
    conversation = create_conversation(owner=owner)
    run = ToolLoopService().start(conversation, message=text, provider=provider)
    execute(run)
    return run


def kinds(result: dict[str, Any]) -> list[str]:
    return [event["type"] for event in result["events"]]


def stored_messages(conversation: Conversation, streamed: dict[str, str]) -> list[dict[str, Any]]:
    """The agent's messages the stored assistant and tool turns must give (``streamed``:
    the message id each streamed turn had, by stored id), arguments decoded."""
    out: list[dict[str, Any]] = []
    for row in Message.objects.filter(conversation=conversation).exclude(role="user"):
        if row.role == "tool":
            message = {"id": str(row.pk), "role": "tool", "toolCallId": row.tool_call_id}
            message["content"] = row.content
            if row.is_error:
                message["metadata"] = {"llm_conversations": {"is_error": True}}
            out.append(message)
            continue
        message = {"id": streamed.get(str(row.pk), str(row.pk)), "role": "assistant"}
        if row.content:
            message["content"] = row.content
        if str(row.pk) in streamed:
            # The client keeps the stored id its TEXT_MESSAGE_END named.
            message["metadata"] = {"llm_conversations": {"message_id": str(row.pk)}}
        if row.tool_calls:
            message["toolCalls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"],
                    },
                }
                for call in row.tool_calls
            ]
        out.append(message)
    return out


def test_a_text_reply(live_server: Any, owner: User) -> None:
    run = run_of(owner, "hello")
    result = read(live_server, run)
    assert joined(kinds(result), "TEXT_MESSAGE_CONTENT") == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    reply = Message.objects.get(role="assistant")
    assert [(m["role"], m.get("content")) for m in result["messages"]] == [("assistant", "hello")]
    (end,) = [e for e in result["events"] if e["type"] == "TEXT_MESSAGE_END"]
    assert end["metadata"]["llm_conversations"]["message_id"] == str(reply.pk)
    assert result["state"]["status"] == "completed"


def test_tool_calls_with_results_and_an_error(live_server: Any, owner: User) -> None:
    run = run_of(owner, calls_text(("a", "get_weather", {"city": "Oslo"}), ("c", "fail", {})))
    result = read(live_server, run)
    assert {"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"} <= set(
        kinds(result)
    )
    streamed = {
        event["metadata"]["llm_conversations"]["message_id"]: event["messageId"]
        for event in result["events"]
        if event["type"] == "TEXT_MESSAGE_END" and "metadata" in event
    }
    messages = result["messages"]
    for message in messages:
        for call in message.get("toolCalls", []):
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    assert messages == stored_messages(run.conversation, streamed)
    error = next(e for e in result["events"] if e.get("toolCallId") == "c" and "content" in e)
    assert error["metadata"] == {"llm_conversations": {"is_error": True}}


def test_an_approval_pause(live_server: Any, owner: User) -> None:
    run = run_of(owner, calls_text(("d", "delete_file", {"path": "/x"})))
    result = read(live_server, run)
    assert result["events"][-1]["outcome"] == {
        "type": "interrupt",
        "interrupts": [{"id": "d", "reason": "requires_approval", "toolCallId": "d"}],
    }
    assert result["state"]["status"] == "requires_action"
    ToolLoopService().approve(run.pk, ["d"])
    execute(run)
    # The rest of the run, after the pause: the result of the approved call, then the answer.
    resumed = read(live_server, run, last_event_id=result["ids"][-1])
    results = [e for e in resumed["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert [e["toolCallId"] for e in results] == ["d"]
    assert resumed["events"][-1]["outcome"] == {"type": "success"}


def test_a_failure(live_server: Any, owner: User) -> None:
    run = run_of(owner, "hi", provider="broken")
    result = read(live_server, run)
    assert result["events"][-1] == {
        "type": "RUN_ERROR",
        "message": run.error_message,
        "code": run.error_type,
    }


def test_a_cancel(live_server: Any, owner: User) -> None:
    run = run_of(owner, "hi", provider="cancelled")
    result = read(live_server, run)
    assert result["events"][-1]["outcome"] == {"type": "cancelled"}
    assert result["state"]["status"] == "cancelled"


def test_resuming_from_every_last_event_id(live_server: Any, owner: User) -> None:
    run = run_of(owner, calls_text(("a", "get_weather", {"city": "Oslo"})))
    full = read(live_server, run)
    for event_id in sorted({i for i in full["ids"] if i is not None})[:-1]:
        resumed = read(live_server, run, last_event_id=event_id)
        assert resumed["events"][-1] == full["events"][-1], event_id


def test_streamed_reasoning_is_a_reasoning_message_the_agent_keeps(
    live_server: Any, owner: User, settings: Any
) -> None:
    from tests.api.test_reasoning_shown import THOUGHT, configure

    configure(settings, show=True)
    run = run_of(owner, "Hi", provider="thinker")
    result = read(live_server, run)
    assert kinds(result)[1:9] == [
        "STATE_SNAPSHOT",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
    ]
    roles = [(m["role"], m.get("content")) for m in result["messages"]]
    assert roles == [("reasoning", THOUGHT), ("assistant", "Hello!")]
