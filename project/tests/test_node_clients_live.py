"""The AI SDK's chat and AG-UI's ``HttpAgent`` (npm packages of tests/package.json,
driven by the scripts of tests/node) show a background run's text as the model writes it.

The demo's live server starts each run on a worker engine (``llm_worker``, and on
PostgreSQL Celery); the model halts after each piece of its answer, and the client
shows each piece before the next is written: three texts, one per piece, each
while the run still runs. A client signs in as a browser does (the demo's
session authentication and its CSRF token).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Run, RunStatus
from project.tests.background_runs import (
    FIRST_PIECE_SECONDS,
    PIECES,
    STORY,
    Story,
    assert_told_once,
    engine,
    story,
)
from project.tests.live_runs import signed_in
from tests.api import test_ag_ui_node as ag_ui
from tests.api import test_ai_sdk_node as ai_sdk
from tests.support.node_scripts import NodeScript

__all__ = ["engine", "story"]  # fixtures

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(ai_sdk.MISSING is not None, reason=f"{ai_sdk.MISSING} (CI=true fails)"),
    pytest.mark.skipif(ag_ui.MISSING is not None, reason=f"{ag_ui.MISSING} (CI=true fails)"),
]


@pytest.fixture
def owner() -> User:
    return User.objects.create_user("nora")


def follow_the_story(client: NodeScript, story: Story) -> dict[str, Any]:
    """Let the model go on each time the client shows its last piece; the client's result."""
    for told in range(1, len(PIECES)):
        client.wait_for(story.told(told), FIRST_PIECE_SECONDS if told == 1 else 10)
        assert Run.objects.get().status == RunStatus.RUNNING  # the model still writes
        story.go_on()
    result = client.result()
    # One text per piece: each arrived on its own, as it was written.
    assert client.progress == [story.told(told) for told in range(1, len(PIECES) + 1)]
    return result


def test_the_ai_sdk_chat_shows_a_background_runs_text_as_the_model_writes_it(
    engine: str, story: Story, live_server: Any, owner: User
) -> None:
    conversation = create_conversation(owner=owner)
    spec = {
        "mode": "chat",
        "api": f"{live_server.url}/api/conversations/{conversation.pk}/chat/",
        "chatId": str(conversation.pk),
        "text": "Tell me a story.",
        "headers": signed_in(owner),
        "progress": True,
    }
    with NodeScript(str(ai_sdk.NODE), ai_sdk.SCRIPT, spec) as chat:
        result = follow_the_story(chat, story)
    ai_sdk.assert_clean(result, responses=1)
    run = Run.objects.get()
    assert_told_once(story.provider, run)
    _, answer = result["messages"]
    assert answer["parts"] == ai_sdk.stored_parts(conversation)
    assert answer["metadata"]["status"] == "completed"


def test_ag_ui_http_agent_shows_a_background_runs_text_as_the_model_writes_it(
    engine: str, story: Story, live_server: Any, owner: User
) -> None:
    conversation = create_conversation(owner=owner)
    spec = {
        "start": {
            "url": f"{live_server.url}/api/conversations/{conversation.pk}/runs/",
            "body": {"message": "Tell me a story.", "background": True},
        },
        "threadId": str(conversation.pk),
        "headers": signed_in(owner),
        "progress": True,
    }
    with NodeScript(str(ag_ui.NODE), ag_ui.SCRIPT, spec) as agent:
        result = follow_the_story(agent, story)
    run = Run.objects.get()
    assert_told_once(story.provider, run)
    assert (result["status"], result["contentType"]) == (200, "text/event-stream")
    assert (result["invalid"], result["verifyError"], result["agentError"]) == ([], None, None)
    assert result["events"][0] == {
        "type": "RUN_STARTED",
        "threadId": str(conversation.pk),
        "runId": str(run.pk),
    }
    contents = [e["delta"] for e in result["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(contents) == STORY
    assert [(m["role"], m.get("content")) for m in result["messages"]] == [("assistant", STORY)]
    assert result["state"]["status"] == "completed"
