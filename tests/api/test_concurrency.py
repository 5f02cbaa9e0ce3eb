"""Concurrent requests: a double submit is a 409; a database error is never an HTML 500."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, IntegrityError, OperationalError, connection, transaction
from rest_framework.test import APIClient

from llm_conversations.api.views import conversations
from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.sequence import check_sequence
from llm_conversations.exceptions import ConversationBusy
from llm_conversations.models import Conversation, Run
from llm_conversations.runs import ToolLoopService, starts
from tests.conftest import requires_postgresql, run_together


@requires_postgresql
@pytest.mark.parametrize("round_", range(4))
def test_simultaneous_run_submits_are_201_or_409_conversation_busy(
    transactional_db: None, round_: int
) -> None:
    user = User.objects.create_user(f"alice{round_}", password="alice-pw")
    conversation = create_conversation(owner=user, title="Double submit")
    workers = 60

    def work(n: int) -> tuple[int, Any]:
        client = APIClient()
        client.force_authenticate(user)
        response = client.post(
            f"/api/conversations/{conversation.pk}/runs/",
            {"message": f"hello {n}"},
            format="json",
        )
        is_json = response["Content-Type"].startswith("application/json")
        return response.status_code, response.json() if is_json else None

    outcomes = run_together(workers, work)
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    statuses = [status for status, _ in outcomes]
    assert set(statuses) <= {201, 409}, statuses
    assert 201 in statuses
    for status, body in outcomes:
        if status == 409:
            assert body["error"]["code"] == "conversation_busy"
    # Every admitted run stored its turn and its reply; nothing else was stored.
    started = statuses.count(201)
    assert Run.objects.filter(conversation=conversation).count() == started
    history = load_messages(conversation)
    assert len(history) == 2 * started
    check_sequence(history)


def test_a_run_inserted_without_the_lock_still_makes_start_busy(
    db: None, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The constraint is the last line of defence: its violation is recognised
    # by name (PostgreSQL) or column (SQLite), with no racy re-check.
    conversation = create_conversation(owner=user)
    Run.objects.create(conversation=conversation, provider="echo", model="echo", max_iterations=1)
    counted = starts.count_in
    # The lock counts as it does, but sees no active run.
    monkeypatch.setattr(starts, "count_in", lambda *args: (counted(*args)[0], None))
    with pytest.raises(ConversationBusy):
        ToolLoopService().start(conversation, "hello")


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (IntegrityError, 409, "conflict"),
        (OperationalError, 503, "database_unavailable"),
        (DatabaseError, 500, "server_error"),
    ],
)
def test_an_unforeseen_database_error_is_logged_and_answered_in_the_error_format(
    client: APIClient,
    conversation: Conversation,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    error: type[DatabaseError],
    status: int,
    code: str,
) -> None:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise error("duplicate key value violates unique constraint secret_index")

    monkeypatch.setattr(conversations, "append_messages", fail)
    response = client.post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"role": "user", "content": "hi"},
        format="json",
    )
    assert response.status_code == status
    body = response.json()["error"]
    assert body["code"] == code
    # Stable words for the client; the details go to the log (not those of a
    # transient failure, which is only counted, by type).
    assert "secret_index" not in response.content.decode()
    assert ("secret_index" in caplog.text) is (error is not OperationalError)
    assert response.has_header("Retry-After") is (status == 503)


@requires_postgresql
def test_a_lock_wait_over_lock_timeout_is_503_with_retry_after_and_stores_nothing(
    transactional_db: None, user: User
) -> None:
    # A real transient failure: another connection holds the conversation's
    # row lock, and this one gives up after lock_timeout.
    conversation = create_conversation(owner=user, title="Locked")
    locked = threading.Event()
    release = threading.Event()

    def hold_lock() -> None:
        try:
            with transaction.atomic():
                Conversation.objects.select_for_update().get(pk=conversation.pk)
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    try:
        assert locked.wait(10)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '100ms'")
        client = APIClient()
        client.force_authenticate(user)
        response = client.post(
            f"/api/conversations/{conversation.pk}/messages/",
            {"role": "user", "content": "hi"},
            format="json",
        )
    finally:
        release.set()
        holder.join()
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert response.json()["error"]["code"] == "database_unavailable"
    assert response.json()["error"]["details"] == {"retry_after": 1}
    assert load_messages(conversation) == []
    # Once the lock is gone the same request succeeds.
    retried = client.post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"role": "user", "content": "hi"},
        format="json",
    )
    assert retried.status_code == 201
    assert len(load_messages(conversation)) == 1
