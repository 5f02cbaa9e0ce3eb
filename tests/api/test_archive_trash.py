"""Archive, trash and restore through the API: the list's filters, what a trashed
conversation refuses, owner isolation, and the purge after ``TRASH_RETENTION_DAYS``."""

from __future__ import annotations

import threading
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.conversations.lifecycle import trash_conversation
from llm_conversations.conversations.retention import (
    purge_conversations,
    purge_trashed_conversations,
    trash_cutoff,
)
from llm_conversations.exceptions import LLMConversationsError
from llm_conversations.models import Conversation, Message, Run, RunStatus
from llm_conversations.runs import ToolLoopService
from tests.api.test_runs import run_url, runs_url
from tests.conftest import requires_postgresql

pytestmark = pytest.mark.django_db

URL = "/api/conversations/"
# The count of the page and the page itself: whatever the filters.
LIST_QUERIES = 2


def url(conversation: Conversation, action: str = "") -> str:
    return f"{URL}{conversation.pk}/{action + '/' if action else ''}"


def titles(client: APIClient, query: str = "") -> list[str]:
    response = client.get(f"{URL}{query}")
    assert response.status_code == 200, response.content
    return sorted(item["title"] for item in response.json()["results"])


def error(response: Any) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


@pytest.fixture
def states(client: APIClient, user: User) -> dict[str, Conversation]:
    """One conversation in each state, changed through the API."""
    made = {
        title: create_conversation(
            owner=user, title=title, messages=[{"role": "user", "content": "Hi"}]
        )
        for title in ("plain", "archived", "trashed", "both")
    }
    for title in ("archived", "both"):
        assert client.post(url(made[title], "archive")).status_code == 200
    for title in ("trashed", "both"):
        assert client.delete(url(made[title])).status_code == 204
    return made


def test_the_list_hides_archived_and_trashed_unless_asked(
    client: APIClient, states: dict[str, Conversation]
) -> None:
    assert titles(client) == ["plain"]
    assert titles(client, "?archived=false") == ["plain"]
    assert titles(client, "?archived=true") == ["archived"]
    assert titles(client, "?archived=all") == ["archived", "plain"]
    assert titles(client, "?trashed=true") == ["both", "trashed"]
    assert titles(client, "?trashed=true&archived=false") == ["trashed"]
    assert titles(client, "?trashed=true&archived=true") == ["both"]
    assert titles(client, "?trashed=false&archived=all&search=Hi") == ["archived", "plain"]
    for bad in ("?archived=maybe", "?trashed=perhaps", "?archived="):
        response = client.get(f"{URL}{bad}")
        assert error(response) == (400, "invalid"), bad


def test_the_list_costs_the_same_queries_with_any_filter(
    client: APIClient, states: dict[str, Conversation], django_assert_num_queries: Any
) -> None:
    for query in ("", "?archived=all", "?trashed=true", "?trashed=true&archived=false"):
        with django_assert_num_queries(LIST_QUERIES):
            assert client.get(f"{URL}{query}").status_code == 200


def test_the_representation_shows_both_times(
    client: APIClient, states: dict[str, Conversation]
) -> None:
    plain, both = client.get(url(states["plain"])).json(), client.get(url(states["both"])).json()
    assert (plain["archived_at"], plain["trashed_at"]) == (None, None)
    assert both["archived_at"] is not None
    assert both["trashed_at"] is not None


def test_archive_again_keeps_the_first_time_and_unarchive_brings_it_back(
    client: APIClient, conversation: Conversation
) -> None:
    first = client.post(url(conversation, "archive")).json()["archived_at"]
    assert client.post(url(conversation, "archive")).json()["archived_at"] == first
    assert titles(client) == []
    # An archived conversation works as before.
    assert (
        client.post(runs_url(conversation), {"message": "still here"}, format="json").status_code
        == 201
    )
    body = client.post(url(conversation, "unarchive")).json()
    assert body["archived_at"] is None
    assert titles(client) == ["Trip"]


def test_a_trashed_conversation_is_readable_and_refuses_every_change(
    client: APIClient, conversation: Conversation
) -> None:
    failed = Run.objects.create(conversation=conversation, status=RunStatus.FAILED)
    assert client.delete(url(conversation)).status_code == 204
    body = client.get(url(conversation)).json()
    assert body["trashed_at"] is not None
    assert client.get(url(conversation, "messages")).json()["data"][0]["content"] == "Hi"
    refused = [
        client.post(runs_url(conversation), {"message": "more"}, format="json"),
        client.post(url(conversation, "messages"), {"role": "user", "content": "x"}, format="json"),
        client.post(run_url(failed, "retry"), {}, format="json"),
        client.patch(url(conversation), {"title": "new"}, format="json"),
        client.post(url(conversation, "archive")),
    ]
    assert [error(response) for response in refused] == [(409, "conversation_trashed")] * 5
    conversation.refresh_from_db()
    assert (conversation.title, conversation.message_count) == ("Trip", 1)
    assert Run.objects.get(pk=failed.pk).status == RunStatus.FAILED
    # Deleting again leaves it in the trash since the first time.
    assert client.delete(url(conversation)).status_code == 204
    assert client.get(url(conversation)).json()["trashed_at"] == body["trashed_at"]


def test_restore_makes_it_writable_again_and_keeps_it_archived(
    client: APIClient, states: dict[str, Conversation]
) -> None:
    both = states["both"]
    restored = client.post(url(both, "restore"))
    assert restored.status_code == 200
    assert restored.json()["trashed_at"] is None
    assert restored.json()["archived_at"] is not None
    assert titles(client, "?archived=true") == ["archived", "both"]
    run = client.post(runs_url(both), {"message": "back"}, format="json")
    assert (run.status_code, run.json()["status"]) == (201, "completed")
    # Restoring what is not in the trash changes nothing.
    assert client.post(url(states["plain"], "restore")).json()["trashed_at"] is None


def test_trash_is_refused_while_a_run_is_active(
    client: APIClient, conversation: Conversation
) -> None:
    Run.objects.create(conversation=conversation, status=RunStatus.REQUIRES_ACTION)
    assert error(client.delete(url(conversation))) == (409, "conversation_busy")
    conversation.refresh_from_db()
    assert conversation.trashed_at is None


def test_permanent_delete_from_the_list_or_the_trash(
    client: APIClient, states: dict[str, Conversation]
) -> None:
    assert client.delete(url(states["plain"]) + "?permanent=true").status_code == 204
    assert client.delete(url(states["trashed"]) + "?permanent=1").status_code == 204
    assert error(client.delete(url(states["both"]) + "?permanent=sure")) == (400, "invalid")
    assert set(Conversation.objects.values_list("title", flat=True)) == {"archived", "both"}


def test_another_users_trash_is_a_404(
    client: APIClient, other_user: User, states: dict[str, Conversation]
) -> None:
    thief = APIClient()
    thief.force_authenticate(other_user)
    assert titles(thief, "?trashed=true") == []
    assert titles(thief, "?archived=all") == []
    trashed = states["trashed"]
    for response in (
        thief.get(url(trashed)),
        thief.get(url(trashed, "messages")),
        thief.post(url(trashed, "restore")),
        thief.post(url(trashed, "archive")),
        thief.post(url(states["plain"], "unarchive")),
        thief.delete(url(trashed)),
        thief.delete(url(trashed) + "?permanent=true"),
    ):
        assert error(response) == (404, "not_found")
    trashed.refresh_from_db()
    assert trashed.trashed_at is not None


def _age_trash(conversation: Conversation, days: float) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(
        trashed_at=timezone.now() - timedelta(days=days)
    )


def test_the_purge_deletes_the_trash_past_its_retention(
    settings: Any, client: APIClient, states: dict[str, Conversation]
) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "TRASH_RETENTION_DAYS": 30}
    _age_trash(states["trashed"], 31)
    _age_trash(states["both"], 29)
    dry = StringIO()
    call_command("purge_conversations", "--dry-run", stdout=dry)
    assert "Would delete 1 conversation(s) (1 message(s)) in the trash for more than 30" in (
        dry.getvalue()
    )
    out, err = StringIO(), StringIO()
    call_command("purge_conversations", stdout=out, stderr=err)
    assert "Deleted 1 conversation(s) (1 message(s)) in the trash for more than 30 day(s)" in (
        out.getvalue()
    )
    assert err.getvalue().splitlines()[-1].endswith("1/1 (100%)")
    assert set(Conversation.objects.values_list("title", flat=True)) == {
        "plain",
        "archived",
        "both",
    }
    # Restored meanwhile, an old one stays; --trash-days overrides the setting.
    _age_trash(states["both"], 40)
    client.post(url(states["both"], "restore"))
    call_command("purge_conversations", "--trash-days", "1", stdout=StringIO(), stderr=StringIO())
    assert Conversation.objects.count() == 3


def test_the_task_purges_the_trash_and_none_is_kept_forever(
    settings: Any, states: dict[str, Conversation]
) -> None:
    _age_trash(states["trashed"], 400)
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "TRASH_RETENTION_DAYS": None}
    assert trash_cutoff() is None
    assert purge_trashed_conversations().conversations == 0
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "TRASH_RETENTION_DAYS": 365}
    result = purge_conversations.enqueue().return_value
    assert (result["trashed"], result["conversations"], result["messages"]) == (1, 1, 1)
    assert not Conversation.objects.filter(pk=states["trashed"].pk).exists()
    assert not Message.objects.filter(conversation_id=states["trashed"].pk).exists()


def test_the_admin_filters_by_state_and_its_actions_change_it(
    states: dict[str, Conversation],
) -> None:
    staff = User.objects.create_superuser("staff", "staff@example.com", "pw")
    admin = Client()
    admin.force_login(staff)
    changelist = reverse("admin:llm_conversations_conversation_changelist")

    def listed(state: str) -> set[str]:
        response = admin.get(changelist, {"state": state})
        return {c.title for c in response.context["cl"].result_list}

    assert listed("active") == {"plain"}
    assert listed("archived") == {"archived"}
    assert listed("trashed") == {"trashed", "both"}
    Run.objects.create(conversation=states["archived"], status=RunStatus.RUNNING)
    selected = [states["plain"].pk, states["archived"].pk]
    response = admin.post(
        changelist, {"action": "trash", "_selected_action": selected}, follow=True
    )
    notes = [str(m) for m in response.context["messages"]]
    assert any("still active" in note for note in notes)
    assert "1 moved to the trash." in notes
    assert listed("trashed") == {"plain", "trashed", "both"}
    admin.post(changelist, {"action": "restore", "_selected_action": [states["both"].pk]})
    assert listed("archived") == {"archived", "both"}
    page = admin.get(
        reverse("admin:llm_conversations_conversation_change", args=[states["trashed"].pk])
    )
    assert "trashed at" in page.content.decode().lower()


def _race(conversation: Conversation) -> dict[str, str]:
    """Start a run and trash ``conversation`` at once; what each one answered."""
    barrier = threading.Barrier(2)
    results: dict[str, str] = {}

    def attempt(name: str, change: Any) -> None:
        barrier.wait()
        try:
            change()
            results[name] = "ok"
        except LLMConversationsError as exc:
            results[name] = exc.code
        finally:
            connection.close()

    threads = [
        threading.Thread(
            target=attempt, args=("start", lambda: ToolLoopService().start(conversation, "go"))
        ),
        threading.Thread(target=attempt, args=("trash", lambda: trash_conversation(conversation))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@requires_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_run_start_and_a_trash_racing_leave_one_outcome(user: User) -> None:
    """Either the run started first (the trash is refused) or the trash won (the
    start is refused): never a run in the trash."""
    for _ in range(6):
        conversation = create_conversation(owner=user)
        results = _race(conversation)
        conversation.refresh_from_db()
        queued = Run.objects.filter(conversation=conversation, status=RunStatus.QUEUED).exists()
        assert results in (
            {"start": "ok", "trash": "conversation_busy"},
            {"start": "conversation_trashed", "trash": "ok"},
        )
        assert queued == (conversation.trashed_at is None)
