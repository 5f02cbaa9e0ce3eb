"""``GET runs/{id}/decisions/``: a run's decision trail, owner-scoped, in three queries."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Conversation, Run, ToolDecision
from llm_conversations.runs.policy import RunPolicy, Verdict
from tests.api.conftest import API_SETTINGS
from tests.api.test_decisions import DELETE, paused, url

pytestmark = pytest.mark.django_db


def trail(client: APIClient, run: Run, query: str = "") -> Any:
    return client.get(url(run, "decisions") + query)


def test_the_trail_says_who_decided_which_call_when_why_and_on_what(
    client: APIClient, user: User, conversation: Conversation
) -> None:
    run = paused(conversation, DELETE, ("e", "delete_file", {"path": "/etc"}))
    digest = run.approval_digest
    client.post(url(run, "approve"), {"tool_call_ids": ["d"], "reason": "Scratch."}, format="json")
    run.refresh_from_db()
    client.post(url(run, "deny"), {"reason": "Not /etc."}, format="json")
    response = trail(client, run)
    assert response.status_code == 200, response.json()
    page = response.json()
    assert page["next"] is None
    first, second = page["results"]
    rows = {row.call_id: row for row in ToolDecision.objects.all()}
    assert first == {
        "id": rows["d"].pk,
        "tool_call_id": "d",
        "tool_name": "delete_file",
        "arguments": {"path": "/tmp/x"},
        "decision": "approved",
        "decided_by": str(user.pk),
        "by_rule": False,
        "reason": "Scratch.",
        "digest": digest,
        "decided_at": rows["d"].decided_at.isoformat().replace("+00:00", "Z"),
    }
    assert (second["tool_call_id"], second["decision"], second["reason"]) == (
        "e",
        "denied",
        "Not /etc.",
    )
    # The second decision saw only the call still waiting.
    assert second["digest"] == rows["e"].digest != digest
    # What GET runs/{id}/ shows, with who, when and why beside it.
    shown = client.get(f"/api/conversations/{conversation.pk}/runs/{run.pk}/").json()["decisions"]
    assert shown == {row["tool_call_id"]: row["decision"] for row in page["results"]}


class DenyDeletes(RunPolicy):
    def decide_call(self, run: Run, call: Any) -> Verdict | None:
        return Verdict.deny("Deletes are off.") if call.name == "delete_file" else None


def test_a_rule_decision_names_no_user(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "RUN_POLICY": f"{__name__}.DenyDeletes",
    }
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {
            "message": '{"tool_calls": [{"id": "d", "type": "function", "function": '
            '{"name": "delete_file", "arguments": {"path": "/"}}}]}'
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    (row,) = trail(client, run).json()["results"]
    assert (row["decided_by"], row["by_rule"], row["reason"]) == (None, True, "Deletes are off.")


def test_another_users_run_has_no_trail(
    client: APIClient, other_user: User, conversation: Conversation
) -> None:
    theirs = paused(create_conversation(owner=other_user))
    # Their run under their conversation, and under the caller's own conversation.
    assert trail(client, theirs).status_code == 404
    mixed = f"/api/conversations/{conversation.pk}/runs/{theirs.pk}/decisions/"
    assert client.get(mixed).status_code == 404
    body = client.get(f"/api/conversations/{conversation.pk}/runs/not-a-uuid/decisions/").json()
    assert body["error"]["code"] == "not_found"


def test_the_trail_reads_in_three_queries_and_pages(
    client: APIClient, conversation: Conversation, django_assert_num_queries: Any
) -> None:
    calls = [(f"c{n}", "delete_file", {"path": f"/tmp/{n}"}) for n in range(5)]
    run = paused(conversation, *calls)
    client.post(url(run, "approve"), {}, format="json")
    # The conversation, the run's existence, the page of decisions: whatever the page holds.
    with django_assert_num_queries(3):
        response = trail(client, run, "?limit=3")
    page = response.json()
    assert [row["tool_call_id"] for row in page["results"]] == ["c0", "c1", "c2"]
    rest = client.get(page["next"]).json()
    assert [row["tool_call_id"] for row in rest["results"]] == ["c3", "c4"]
    assert trail(client, run, "?limit=0").status_code == 400
