"""ToolLoopService.answer: one call answers a waiting run's calls, all of them or none."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.exceptions import RunStateError
from llm_conversations.models import Run, RunStatus
from llm_conversations.providers import EchoProvider
from llm_conversations.runs import ToolLoopService
from tests.support import loop_tools

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_gauge() -> None:
    loop_tools.gauge = loop_tools.Gauge()


def service() -> ToolLoopService:
    return ToolLoopService(EchoProvider(), tools=loop_tools.registry())


def waiting_run(tool_service: ToolLoopService) -> Run:
    """A run waiting on two approvals (``d1``, ``d2``) and one client-side call (``p``)."""
    calls = [
        ("d1", "delete_file", {"path": "/a"}),
        ("d2", "delete_file", {"path": "/b"}),
        ("p", "pick_color", {"prompt": "Pick"}),
    ]
    text = json.dumps(
        {
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ]
        }
    )
    run = tool_service.send(create_conversation(), ChatMessage.user(text))
    assert run.status == RunStatus.REQUIRES_ACTION
    return run


def tool_turns(run: Run) -> list[Any]:
    return [m for m in load_messages(run.conversation_id) if m.role is Role.TOOL]


def test_approvals_denials_and_outputs_in_one_call_resume_the_run_once() -> None:
    tool_service = service()
    run = waiting_run(tool_service)
    done = tool_service.answer(run.pk, approve=["d1"], deny=["d2"], outputs={"p": "teal"})
    assert done.status == RunStatus.COMPLETED
    assert done.decisions == {"d1": "approved", "d2": "denied"}
    assert loop_tools.gauge.calls == ["delete_file:/a"]
    results = {m.tool_call_id: (m.content, m.is_error) for m in tool_turns(done)}
    assert results == {
        "p": ("teal", False),
        "d1": ("deleted /a", False),
        "d2": ("The operator denied this tool call.", True),
    }


def test_without_resume_the_answered_run_is_queued() -> None:
    tool_service = service()
    run = waiting_run(tool_service)
    answered = tool_service.answer(run.pk, approve=None, outputs={"p": "teal"}, resume=False)
    assert answered.status == RunStatus.QUEUED
    assert answered.decisions == {"d1": "approved", "d2": "approved"}
    assert loop_tools.gauge.calls == []


def test_a_refused_answer_stores_none_of_the_others() -> None:
    tool_service = service()
    run = waiting_run(tool_service)
    with pytest.raises(RunStateError) as info:
        tool_service.answer(run.pk, approve=["d1"], outputs={"nope": "x"})
    assert info.value.code == "unknown_tool_call"
    run.refresh_from_db()
    assert run.status == RunStatus.REQUIRES_ACTION
    assert run.decisions == {}
    assert [p.call.id for p in run.waiting_calls] == ["d1", "d2", "p"]
    assert tool_turns(run) == []


def test_a_run_waits_while_one_of_its_calls_is_unanswered() -> None:
    tool_service = service()
    run = waiting_run(tool_service)
    still = tool_service.answer(run.pk, deny=["d1", "d2"])
    assert still.status == RunStatus.REQUIRES_ACTION
    assert [p.call.id for p in still.waiting_calls] == ["p"]


@pytest.mark.parametrize("answers", [{}, {"approve": []}, {"outputs": {}}])
def test_naming_no_call_is_refused(answers: dict[str, Any]) -> None:
    tool_service = service()
    run = waiting_run(tool_service)
    with pytest.raises(RunStateError) as info:
        tool_service.answer(run.pk, **answers)
    assert info.value.code == "unknown_tool_call"
