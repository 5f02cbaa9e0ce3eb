"""Decisions with a trail: who decided which call, when, why, on what; stale decisions
refused; the calls waiting for a decision listed; an approval rule that decides first."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ToolCall
from llm_conversations.models import Conversation, Run, RunStatus, ToolDecision
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.policy import RunPolicy, Verdict
from tests.api.conftest import API_SETTINGS, calls_text

pytestmark = pytest.mark.django_db

DELETE = ("d", "delete_file", {"path": "/tmp/x"})


def paused(conversation: Conversation, *calls: tuple[str, str, dict[str, Any]]) -> Run:
    service = ToolLoopService()
    run = service.execute(service.start(conversation, calls_text(*(calls or (DELETE,)))).pk)
    assert run.status == RunStatus.REQUIRES_ACTION
    return run


def url(run: Run, action: str) -> str:
    return f"/api/conversations/{run.conversation_id}/runs/{run.pk}/{action}/"


def test_a_decision_keeps_who_when_why_and_what_was_seen(
    client: APIClient, user: User, conversation: Conversation
) -> None:
    run = paused(conversation)
    digest = client.get(f"/api/conversations/{conversation.pk}/runs/{run.pk}/").json()[
        "approval_digest"
    ]
    assert digest == run.approval_digest
    assert len(digest) == 64
    response = client.post(
        url(run, "deny"), {"reason": "Not on production.", "digest": digest}, format="json"
    )
    assert response.status_code == 200, response.json()
    (decision,) = ToolDecision.objects.all()
    assert (decision.call_id, decision.tool_name, decision.decision) == (
        "d",
        "delete_file",
        "denied",
    )
    assert (decision.decided_by, decision.reason, decision.digest) == (
        user,
        "Not on production.",
        digest,
    )
    assert decision.arguments == {"path": "/tmp/x"}
    assert decision.by_rule is False
    assert response.json()["approval_digest"] is None  # nothing waits any more


def test_a_stale_decision_is_refused_and_changes_nothing(
    client: APIClient, conversation: Conversation
) -> None:
    run = paused(conversation)
    response = client.post(url(run, "approve"), {"digest": "0" * 64}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "stale_decision"
    run.refresh_from_db()
    assert (run.status, run.decisions) == (RunStatus.REQUIRES_ACTION, {})
    assert not ToolDecision.objects.exists()
    bad = client.post(url(run, "approve"), {"digest": "not-a-digest"}, format="json")
    assert (bad.status_code, bad.json()["error"]["field"]) == (400, "digest")


def test_the_calls_waiting_for_a_person_are_listed_per_owner(
    client: APIClient, user: User, other_user: User, django_assert_max_num_queries: Any
) -> None:
    mine = [paused(create_conversation(owner=user, title=f"Mine {n}")) for n in range(3)]
    paused(create_conversation(owner=other_user, title="Theirs"))
    with django_assert_max_num_queries(6):
        response = client.get("/api/waiting-calls/")
    body = response.json()
    assert body["count"] == 3
    assert [item["run"] for item in body["results"]] == [str(run.pk) for run in mine]
    first = body["results"][0]
    assert first["tool_call"]["function"]["name"] == "delete_file"
    assert first["conversation_title"] == "Mine 0"
    assert first["approval_digest"] == mine[0].approval_digest
    refused = client.get("/api/waiting-calls/?all=true")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "permission_denied")
    bad = client.get("/api/waiting-calls/?all=maybe")
    assert (bad.status_code, bad.json()["error"]["field"]) == (400, "all")


def test_staff_list_every_users_waiting_calls(user: User, other_user: User) -> None:
    paused(create_conversation(owner=user))
    paused(create_conversation(owner=other_user))
    staff = User.objects.create_user("staff", is_staff=True)
    client = APIClient()
    client.force_authenticate(staff)
    assert client.get("/api/waiting-calls/").json()["count"] == 0
    assert client.get("/api/waiting-calls/?all=true").json()["count"] == 2


class ReadOnlyTmp(RunPolicy):
    """Approves deleting under /tmp, denies it elsewhere, asks a person for the rest."""

    def decide_call(self, run: Run, call: ToolCall) -> Verdict | None:
        if call.name != "delete_file":
            return None
        if str(call.arguments.get("path", "")).startswith("/tmp/"):
            return Verdict.approve("scratch files may go")
        return Verdict.deny("only /tmp may be deleted")


def test_an_approval_rule_decides_before_a_person_is_asked(
    settings: Any, conversation: Conversation
) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "RUN_POLICY": "tests.api.test_decisions.ReadOnlyTmp",
    }
    service = ToolLoopService()
    text = calls_text(DELETE, ("e", "delete_file", {"path": "/etc/passwd"}))
    run = service.execute(service.start(conversation, text).pk)
    assert run.status == RunStatus.COMPLETED
    assert run.decisions == {"d": "approved", "e": "denied"}
    trail = {d.call_id: d for d in ToolDecision.objects.all()}
    assert (trail["d"].by_rule, trail["d"].reason) == (True, "scratch files may go")
    assert (trail["e"].decision, trail["e"].decided_by) == ("denied", None)
    results = {m.tool_call_id: m for m in conversation.messages.filter(role="tool")}
    assert not results["d"].is_error
    assert results["e"].is_error


def test_the_chat_endpoint_keeps_the_reason_the_sdk_sends(
    client: APIClient, user: User, conversation: Conversation
) -> None:
    run = paused(conversation)
    part = {
        "type": "tool-delete_file",
        "toolCallId": "d",
        "state": "approval-responded",
        "approval": {"id": "d", "approved": True, "reason": "I checked it."},
    }
    body = {
        "id": str(conversation.pk),
        "messages": [{"id": str(run.pk), "role": "assistant", "parts": [part]}],
        "trigger": "submit-message",
    }
    response = client.post(f"/api/conversations/{conversation.pk}/chat/", body, format="json")
    assert response.status_code == 200
    b"".join(response.streaming_content)
    (decision,) = ToolDecision.objects.all()
    assert (decision.decision, decision.reason, decision.decided_by) == (
        "approved",
        "I checked it.",
        user,
    )


def test_the_admin_lists_the_trail_and_what_runs_wait_for(user: User) -> None:
    run = paused(create_conversation(owner=user))
    ToolLoopService().deny(run.pk, user=user, reason="no")
    paused(create_conversation(owner=user))
    staff = User.objects.create_superuser("root", "r@example.com", "pw")
    admin = Client()
    admin.force_login(staff)
    trail = admin.get(reverse("admin:llm_conversations_tooldecision_changelist"))
    assert trail.status_code == 200
    assert "delete_file" in trail.content.decode()
    runs = admin.get(
        reverse("admin:llm_conversations_run_changelist"), {"status__exact": "requires_action"}
    )
    assert "delete_file (needs approval)" in runs.content.decode()
