"""Runs: start, inspect, approve, deny, submit outputs, cancel; provider failures."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from llm_conversations.conversations import load_messages
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Conversation, Message, Run, RunStatus
from tests.api.conftest import calls_text
from tests.support import loop_tools

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_gauge() -> None:
    loop_tools.gauge = loop_tools.Gauge()


def runs_url(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/runs/"


def run_url(run: Run | dict[str, Any], action: str = "") -> str:
    run_id = run["id"] if isinstance(run, dict) else run.pk
    conversation_id = run["conversation"] if isinstance(run, dict) else run.conversation_id
    suffix = f"{action}/" if action else ""
    return f"/api/conversations/{conversation_id}/runs/{run_id}/{suffix}"


def start(client: APIClient, conversation: Conversation, **body: Any) -> Any:
    return client.post(runs_url(conversation), body, format="json")


def test_a_run_with_a_tool_call_completes_in_the_request(
    client: APIClient, conversation: Conversation
) -> None:
    response = start(
        client, conversation, message=calls_text(("a", "get_weather", {"city": "Oslo"}))
    )
    assert response.status_code == 201
    run = response.json()
    assert (run["status"], run["termination_reason"], run["iterations"]) == (
        "completed",
        "completed",
        2,
    )
    assert run["tools"] == ["get_weather", "get_time", "delete_file", "pick_color"]
    assert run["usage"]["total_tokens"] > 0
    assert [m.role for m in load_messages(conversation)] == [
        "user",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert client.get(run_url(run)).json() == run


def test_message_object_provider_tools_and_max_iterations(
    client: APIClient, conversation: Conversation
) -> None:
    response = start(
        client,
        conversation,
        message={"role": "user", "content": calls_text(("a", "get_time", {}))},
        provider="echo",
        tools=["get_time"],
        max_iterations=1,
    )
    run = response.json()
    assert (run["tools"], run["max_iterations"]) == (["get_time"], 1)
    # One model call with tools, then the closing call without: max_iterations.
    assert run["termination_reason"] == "max_iterations"


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"message": "hi", "provider": "nope"}, 400, "unknown_provider", "provider"),
        ({"message": "hi", "tools": ["get_time", "nope"]}, 400, "unknown_tool", "tools"),
        ({"message": "hi", "max_iterations": 33}, 400, "invalid_max_iterations", "max_iterations"),
        ({"message": "hi", "max_iterations": 0}, 400, "invalid_max_iterations", "max_iterations"),
        ({"message": ""}, 400, "missing_content", "message"),
        ({"message": "x" * 1001}, 400, "too_large", "message"),
        ({"message": {"role": "user", "content": "x" * 1001}}, 400, "too_large", "message.content"),
        (
            {"message": {"role": "assistant", "content": "x"}},
            400,
            "user_message_required",
            "message.role",
        ),
        ({"message": {"role": "user"}}, 400, "missing_content", "message.content"),
        ({"message": 5}, 400, "invalid", "message"),
        ({}, 400, "invalid", "message"),
        ({"message": "hi", "stream": "maybe"}, 400, "invalid", "stream"),
    ],
)
def test_start_errors(
    client: APIClient,
    conversation: Conversation,
    body: dict[str, Any],
    status: int,
    code: str,
    field: str,
) -> None:
    response = start(client, conversation, **body)
    assert response.status_code == status, response.json()
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field)
    assert not Run.objects.exists()
    assert Message.objects.count() == 1


def test_a_second_run_while_one_is_active_is_409(
    client: APIClient, conversation: Conversation
) -> None:
    first = start(
        client, conversation, message=calls_text(("d", "delete_file", {"path": "/x"}))
    ).json()
    assert first["status"] == "requires_action"
    response = start(client, conversation, message="again")
    assert (response.status_code, response.json()["error"]["code"]) == (409, "conversation_busy")
    assert Message.objects.filter(conversation=conversation).count() == 3


def test_a_history_waiting_for_results_cannot_take_a_user_turn(
    client: APIClient, conversation: Conversation
) -> None:
    client.post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "get_time"}}]},
        format="json",
    )
    response = start(client, conversation, message="hi")
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["field"]) == (
        400,
        "unanswered_tool_calls",
        "message",
    )
    # The run was inserted before the turn was checked: its transaction is rolled back.
    assert not Run.objects.exists()
    assert Message.objects.filter(conversation=conversation).count() == 2


def test_a_run_out_of_time_is_504_run_timeout_with_the_failed_run(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    # An expected end, not a server error: it was answered 500 run_failed.
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "RUN_TIMEOUT": 1e-6}
    response = start(client, conversation, message="hi")
    assert response.status_code == 504
    error = response.json()["error"]
    run = Run.objects.get()
    assert (run.status, run.termination_reason) == ("failed", "timeout")
    assert (error["code"], error["details"]["run"]["id"]) == ("run_timeout", str(run.pk))


@pytest.mark.parametrize(
    ("reason", "status", "code"),
    [
        ("provider_error", 502, "provider_error"),
        ("invalid_output", 502, "invalid_output"),
        ("timeout", 504, "run_timeout"),
        ("worker_lost", 503, "worker_lost"),
        ("context_overflow", 422, "context_overflow"),
        ("budget_exceeded", 429, "budget_exceeded"),
        ("error", 500, "run_failed"),
    ],
)
def test_a_failed_run_is_answered_by_why_it_failed(reason: str, status: int, code: str) -> None:
    from llm_conversations.api.errors import failed_run_error
    from llm_conversations.models import TerminationReason

    # Every reason a run fails for has its answer; only a bug is a 500.
    assert reason in TerminationReason.values
    error = failed_run_error(Run(status=RunStatus.FAILED, termination_reason=reason), {})
    assert error is not None
    assert (error.status_code, error.code) == (status, code)


def test_provider_failure_is_502_with_the_failed_run(
    client: APIClient, conversation: Conversation
) -> None:
    response = start(client, conversation, message="hi", provider="broken")
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "provider_error"
    run = Run.objects.get()
    assert str(run.pk) in error["message"]
    assert error["details"]["run"]["id"] == str(run.pk)
    assert (run.status, run.termination_reason, run.error_type) == (
        "failed",
        "provider_error",
        "ProviderUnavailableError",
    )
    assert error["details"]["run"]["error"]["type"] == "ProviderUnavailableError"
    # The user turn is kept and the conversation takes the next run.
    assert start(client, conversation, message="again").status_code == 201


def test_approve_resumes_and_runs_the_calls(client: APIClient, conversation: Conversation) -> None:
    run = start(
        client,
        conversation,
        message=calls_text(("t", "get_time", {}), ("d", "delete_file", {"path": "/x"})),
    ).json()
    assert run["status"] == "requires_action"
    assert run["waiting_calls"] == [
        {
            "id": "d",
            "type": "function",
            "function": {"name": "delete_file", "arguments": '{"path":"/x"}'},
            "reason": "requires_approval",
        }
    ]
    response = client.post(run_url(run, "approve"), {"tool_call_ids": ["d"]}, format="json")
    assert response.status_code == 200
    assert response.json()["status"] == "completed"
    assert response.json()["decisions"] == {"d": "approved"}
    assert sorted(loop_tools.gauge.calls) == ["delete_file:/x", "get_time"]


def test_deny_answers_with_an_error_result(client: APIClient, conversation: Conversation) -> None:
    run = start(
        client, conversation, message=calls_text(("d", "delete_file", {"path": "/"}))
    ).json()
    response = client.post(run_url(run, "deny"), {}, format="json")
    assert response.json()["status"] == "completed"
    result = next(m for m in load_messages(conversation) if m.role is Role.TOOL)
    assert result.is_error
    assert loop_tools.gauge.calls == []


def test_run_state_errors_are_409(client: APIClient, conversation: Conversation) -> None:
    run = start(
        client, conversation, message=calls_text(("d", "delete_file", {"path": "/"}))
    ).json()
    response = client.post(run_url(run, "approve"), {"tool_call_ids": ["zzz"]}, format="json")
    assert (response.status_code, response.json()["error"]["code"]) == (400, "unknown_tool_call")
    client.post(run_url(run, "approve"), {}, format="json")
    response = client.post(run_url(run, "approve"), {}, format="json")
    assert (response.status_code, response.json()["error"]["code"]) == (409, "run_not_waiting")
    response = client.post(run_url(run, "cancel"))
    assert (response.status_code, response.json()["error"]["code"]) == (409, "run_not_active")


def test_submit_tool_outputs_of_client_side_calls(
    client: APIClient, conversation: Conversation
) -> None:
    run = start(
        client, conversation, message=calls_text(("p", "pick_color", {"prompt": "Pick"}))
    ).json()
    assert run["waiting_calls"][0]["reason"] == "client_side"
    response = client.post(
        run_url(run, "submit_tool_outputs"),
        {"tool_outputs": [{"tool_call_id": "other", "output": "x"}]},
        format="json",
    )
    assert (response.status_code, response.json()["error"]["code"]) == (400, "unknown_tool_call")
    response = client.post(
        run_url(run, "submit_tool_outputs"),
        {"tool_outputs": [{"tool_call_id": "p", "output": {"color": "teal"}}]},
        format="json",
    )
    assert response.json()["status"] == "completed"
    assert ChatMessage.tool_result("p", '{"color": "teal"}') in load_messages(conversation)


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"tool_outputs": []}, "invalid", "tool_outputs"),
        ({}, "invalid", "tool_outputs"),
        ({"tool_outputs": [{"output": "x"}]}, "invalid", "tool_outputs[0].tool_call_id"),
        (
            {
                "tool_outputs": [
                    {"tool_call_id": "p", "output": "a"},
                    {"tool_call_id": "p", "output": "b"},
                ]
            },
            "duplicate_tool_output",
            "tool_outputs",
        ),
        (
            {"tool_outputs": [{"tool_call_id": "p", "output": "x" * 1001}]},
            "too_large",
            "tool_outputs[0].output",
        ),
    ],
)
def test_submit_tool_outputs_validation(
    client: APIClient, conversation: Conversation, body: dict[str, Any], code: str, field: str
) -> None:
    run = start(
        client, conversation, message=calls_text(("p", "pick_color", {"prompt": "Pick"}))
    ).json()
    response = client.post(run_url(run, "submit_tool_outputs"), body, format="json")
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["field"]) == (400, code, field)


def test_cancel_answers_pending_calls_and_frees_the_conversation(
    client: APIClient, conversation: Conversation
) -> None:
    run = start(
        client, conversation, message=calls_text(("d", "delete_file", {"path": "/"}))
    ).json()
    response = client.post(run_url(run, "cancel"))
    assert (response.json()["status"], response.json()["termination_reason"]) == (
        "cancelled",
        "cancelled",
    )
    history = load_messages(conversation)
    assert check_sequence(history) == ()
    assert start(client, conversation, message="next").status_code == 201


def test_run_of_another_conversation_is_404(
    client: APIClient, conversation: Conversation, user: Any
) -> None:
    run = start(client, conversation, message="hi").json()
    other = Conversation.objects.create(owner=user)
    response = client.get(f"/api/conversations/{other.pk}/runs/{run['id']}/")
    assert response.status_code == 404


def test_tools_lists_the_configured_tools(client: APIClient) -> None:
    tools = {t["name"]: t for t in client.get("/api/tools/").json()}
    assert list(tools) == ["get_weather", "get_time", "delete_file", "pick_color"]
    assert tools["get_weather"]["parameters"]["required"] == ["city"]
    assert tools["delete_file"]["requires_approval"] is True
    assert (tools["pick_color"]["client_side"], tools["get_time"]["client_side"]) == (True, False)


def test_default_tools_are_what_a_run_naming_none_offers(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "DEFAULT_TOOLS": ["get_time"]}
    listed = {t["name"]: t["offered_by_default"] for t in client.get("/api/tools/").json()}
    assert listed == {
        "get_weather": False,
        "get_time": True,
        "delete_file": False,
        "pick_color": False,
    }
    plain = start(client, conversation, message="hi").json()
    assert plain["tools"] == ["get_time"]
    named = start(client, conversation, message="hi", tools=["get_weather"]).json()
    assert named["tools"] == ["get_weather"]


def test_runs_status_values_match_the_model() -> None:
    assert set(RunStatus.values) == {
        "queued",
        "running",
        "requires_action",
        "completed",
        "failed",
        "cancelled",
        "waiting",
    }


def test_error_messages_are_stable_words_without_exception_text(
    client: APIClient, conversation: Conversation
) -> None:
    response = start(client, conversation, message="hi", provider="broken")
    run = Run.objects.get()
    # The provider's own words are in the run's recorded error, not in the message.
    assert response.json()["error"]["message"] == (
        f"The provider failed; run {run.pk} records the error."
    )
    response = client.generic(
        "POST", runs_url(conversation), '{"message": ', content_type="application/json"
    )
    error = response.json()["error"]
    assert (error["code"], error["message"]) == ("parse_error", "The body is not valid JSON.")
    assert error["details"] == {"line": 1, "column": 13}
