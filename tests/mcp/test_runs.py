"""MCP tools in runs, end to end: the echo provider calls them, the loop stores every result."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.models import Message, Run, RunStatus
from llm_conversations.runs import ToolLoopService
from tests.api.conftest import calls_text, client, user
from tests.mcp.conftest import everything_over_http, mcp_settings, stdio_entry

__all__ = ["client", "user"]  # the API tests' authenticated user and client

pytestmark = pytest.mark.django_db

ECHO, GZIP, SLOW = "echo", "gzip-file-as-resource", "trigger-long-running-operation"
NEVER_ANSWERS = {"duration": 60, "steps": 1}
# One tool that answers, one that answers with isError, one that never answers.
THREE_CALLS = calls_text(
    ("a", "s__echo", {"message": "hi"}),
    ("b", "s__gzip-file-as-resource", {"data": "ftp://example.com/x"}),
    ("c", "s__trigger-long-running-operation", NEVER_ANSWERS),
)


def three_tools(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``entry`` as server ``s`` offering echo, gzip and the slow tool (1 s to answer)
    to every run that names no tools."""
    return {
        "s": {
            **entry,
            "INCLUDE": [ECHO, GZIP, SLOW],
            "TOOLS": {SLOW: {"TIMEOUT": 1}},
            "OFFER_BY_DEFAULT": True,
        }
    }


def results(conversation: Any) -> dict[str, ChatMessage]:
    return {m.tool_call_id or "": m for m in load_messages(conversation) if m.role is Role.TOOL}


def assert_three_answers(run: Run) -> None:
    assert (run.status, run.termination_reason, run.iterations) == ("completed", "completed", 2)
    assert run.offered_tool_names == ["s__echo", "s__gzip-file-as-resource", f"s__{SLOW}"]
    answered = results(run.conversation_id)
    assert (answered["a"].content, answered["a"].is_error) == ("Echo: hi", False)
    assert answered["b"].is_error
    assert "Unsupported URL protocol for ftp://example.com/x" in answered["b"].content
    assert answered["c"] == ChatMessage.tool_result(
        "c", "The MCP server 's' did not answer within 1 seconds.", is_error=True
    )
    stored = dict(Message.objects.filter(role="tool").values_list("tool_call_id", "is_error"))
    assert stored == {"a": False, "b": True, "c": True}
    final = load_messages(run.conversation_id)[-1]
    assert final.role is Role.ASSISTANT
    assert "Echo: hi" in final.content


def test_a_run_over_stdio(node: str) -> None:
    with mcp_settings(three_tools(stdio_entry(node))):
        run = ToolLoopService().send(create_conversation(), THREE_CALLS)
    assert_three_answers(run)


def test_a_run_over_streamable_http(everything_url: str) -> None:
    with mcp_settings(three_tools({"URL": everything_url})):
        run = ToolLoopService().send(create_conversation(), THREE_CALLS)
    assert_three_answers(run)


def test_a_tool_that_requires_approval_waits_then_runs(node: str) -> None:
    entry = stdio_entry(
        node,
        INCLUDE=[ECHO, "get-sum"],
        TOOLS={ECHO: {"REQUIRES_APPROVAL": True}},
        OFFER_BY_DEFAULT=True,
    )
    service = ToolLoopService()
    with mcp_settings({"s": entry}):
        conversation = create_conversation()
        text = calls_text(
            ("e", "s__echo", {"message": "ok?"}), ("g", "s__get-sum", {"a": 1, "b": 2})
        )
        run = service.send(conversation, text)
        assert run.status == RunStatus.REQUIRES_ACTION
        assert [(c.call.id, c.reason) for c in run.waiting_calls] == [("e", "requires_approval")]
        assert results(conversation) == {}  # no call of the turn ran before the decision
        run = service.approve(run)
    assert run.status == RunStatus.COMPLETED
    answered = results(conversation)
    assert answered["e"].content == "Echo: ok?"
    assert answered["g"].content == "The sum of 1 and 2 is 3."


def test_a_client_side_server_waits_for_submitted_outputs(node: str) -> None:
    service = ToolLoopService()
    entry = stdio_entry(node, INCLUDE=[ECHO], CLIENT_SIDE=True, OFFER_BY_DEFAULT=True)
    with mcp_settings({"s": entry}):
        conversation = create_conversation()
        run = service.send(conversation, calls_text(("e", "s__echo", {"message": "in the app"})))
        assert [(c.call.id, c.reason) for c in run.waiting_calls] == [("e", "client_side")]
        run = service.submit_tool_outputs(run, {"e": "echoed by the frontend"})
    assert run.status == RunStatus.COMPLETED
    assert results(conversation)["e"].content == "echoed by the frontend"


def test_the_api_lists_mcp_tools_and_a_server_that_went_down_is_an_error_result(
    node: str, client: APIClient, user: User, django_assert_num_queries: Any
) -> None:
    conversation = create_conversation(owner=user)
    with everything_over_http(node) as (url, server):
        entry = {"URL": url, "INCLUDE": [ECHO, "get-sum"], "REQUIRES_APPROVAL": True}
        with mcp_settings({"web": entry}):
            with django_assert_num_queries(0):
                listed = client.get("/api/tools/")
            assert listed.status_code == 200
            assert [
                (t["name"], t["requires_approval"], t["client_side"], t["offered_by_default"])
                for t in listed.json()
            ] == [
                ("web__echo", True, False, False),
                ("web__get-sum", True, False, False),
            ]
            assert listed.json()[0]["parameters"]["required"] == ["message"]
            server.terminate()
            server.wait(timeout=10)
            response = client.post(
                f"/api/conversations/{conversation.pk}/runs/",
                {
                    "message": calls_text(("e", "web__echo", {"message": "anyone?"})),
                    "tools": ["web__echo"],
                },
                format="json",
            )
            assert response.json()["status"] == "requires_action"
            run = client.post(
                f"/api/conversations/{conversation.pk}/runs/{response.json()['id']}/approve/",
                {},
                format="json",
            )
    assert run.status_code == 200
    assert run.json()["status"] == "completed"
    result = results(conversation)["e"]
    assert result.is_error
    assert result.content.startswith("The MCP server 'web' is not reachable")


def test_mcp_tools_are_offered_only_where_configured_so(node: str) -> None:
    local = "tests.support.loop_tools.get_time"
    entry = stdio_entry(node, INCLUDE=[ECHO, "get-sum"])
    service = ToolLoopService()
    with mcp_settings({"s": entry}, TOOLS=[local]):
        # A run that names no tools: TOOLS only, none of the server's.
        plain = service.start(create_conversation(), "hi")
        assert plain.offered_tool_names == ["get_time"]
        # Named by the run, a server's tool is offered all the same.
        named = service.start(create_conversation(), "hi", tools=["s__get-sum"])
        assert named.offered_tool_names == ["s__get-sum"]
    with mcp_settings({"s": {**entry, "OFFER_BY_DEFAULT": True}}, TOOLS=[local]):
        every = service.start(create_conversation(), "hi")
    assert every.offered_tool_names == ["get_time", "s__echo", "s__get-sum"]
    with mcp_settings({"s": entry}, TOOLS=[local], DEFAULT_TOOLS=["s__echo", "s__gone"]):
        # DEFAULT_TOOLS names them: those only; a name no server listed is left out.
        chosen = service.start(create_conversation(), "hi")
    assert chosen.offered_tool_names == ["s__echo"]
