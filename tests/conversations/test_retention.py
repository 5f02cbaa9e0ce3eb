"""Purging idle conversations: the setting, the service, the command and the task."""

from __future__ import annotations

import threading
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from llm_conversations.conversations import append_messages, create_conversation
from llm_conversations.conversations.retention import (
    conversation_cutoff,
    delete_conversations,
    idle_conversations,
    purge_idle_conversations,
)
from llm_conversations.conversations.retention import purge_conversations as purge_task
from llm_conversations.core.messages import ChatMessage
from llm_conversations.models import Conversation, Feedback, Message, Run, RunEvent, RunStatus
from tests.conftest import requires_postgresql

pytestmark = pytest.mark.django_db


def call(*args: str, **options: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def conversation(idle_days: float, title: str = "", messages: int = 2) -> Conversation:
    turns = [ChatMessage.user("q"), ChatMessage.assistant("a")][:messages]
    made = create_conversation(title=title, messages=turns)
    Conversation.objects.filter(pk=made.pk).update(
        updated_at=timezone.now() - timedelta(days=idle_days)
    )
    return made


def titles() -> list[str]:
    return sorted(Conversation.objects.values_list("title", flat=True))


class TestSetting:
    def test_forever_by_default(self) -> None:
        assert conversation_cutoff() is None
        conversation(1000, "old")
        assert purge_idle_conversations().conversations == 0
        assert titles() == ["old"]

    def test_cutoff_follows_the_setting(self, settings: Any) -> None:
        settings.LLM_CONVERSATIONS = {
            **settings.LLM_CONVERSATIONS,
            "CONVERSATION_RETENTION_DAYS": 30,
        }
        now = timezone.now()
        assert conversation_cutoff(now) == now - timedelta(days=30)
        assert conversation_cutoff(now, days=2) == now - timedelta(days=2)


class TestPurge:
    def test_idle_ones_go_with_their_rows_and_active_ones_stay(self, settings: Any) -> None:
        settings.LLM_CONVERSATIONS = {
            **settings.LLM_CONVERSATIONS,
            "CONVERSATION_RETENTION_DAYS": 30,
        }
        old = conversation(40, "old")
        run = Run.objects.create(conversation=old, status=RunStatus.COMPLETED)
        RunEvent.objects.create(run=run, type="run.completed", data={})
        busy = conversation(40, "busy")
        Run.objects.create(conversation=busy, status=RunStatus.RUNNING)
        conversation(10, "recent")

        out, err = call("purge_conversations", "--dry-run")
        assert out.startswith(
            "Would delete 1 conversation(s) (2 message(s)) idle for more than 30 day(s)"
        )
        assert err == ""
        assert len(titles()) == 3

        out, err = call("purge_conversations")
        assert out.startswith(
            "Deleted 1 conversation(s) (2 message(s)) idle for more than 30 day(s)"
        )
        assert "1/1 (100%)" in err
        assert titles() == ["busy", "recent"]
        assert not Run.objects.filter(pk=run.pk).exists()
        assert not RunEvent.objects.exists()
        assert Message.objects.count() == 4
        assert call("purge_conversations")[0].startswith("Deleted 0 conversations: none idle")

    def test_batches_report_progress_and_days_override_the_setting(self) -> None:
        for n in range(25):
            conversation(3, f"c{n:02}", messages=1)
        out, _ = call("purge_conversations", "--days", "5")
        assert "Deleted 0" in out
        out, err = call("purge_conversations", "--days", "2", "--batch-size", "10")
        assert "Deleted 25 conversation(s) (25 message(s)) idle for more than 2 day(s)" in out
        assert [line.split()[-2] for line in err.splitlines()] == ["10/25", "20/25", "25/25"]
        assert not Conversation.objects.exists()

    def test_bad_options_and_forever(self, settings: Any) -> None:
        settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "TRASH_RETENTION_DAYS": None}
        with pytest.raises(CommandError, match="kept forever"):
            call("purge_conversations")
        with pytest.raises(CommandError, match="negative"):
            call("purge_conversations", "--days", "-1")
        with pytest.raises(CommandError, match="at least 1"):
            call("purge_conversations", "--days", "1", "--batch-size", "0")

    def test_a_conversation_that_became_recent_or_busy_stays(self) -> None:
        """A conversation that a message reached, or that a run started on, after it was
        picked stays: the delete reads the candidates again."""
        stale = conversation(40, "reached", messages=1)
        started = conversation(40, "started")
        conversation(40, "old")
        cutoff = timezone.now() - timedelta(days=30)
        picked = list(idle_conversations(cutoff).values_list("pk", flat=True))
        assert len(picked) == 3
        append_messages(stale, [ChatMessage.assistant("late")])
        Run.objects.create(conversation=started, status=RunStatus.QUEUED)
        assert delete_conversations(idle_conversations(cutoff)).conversations == 1
        assert titles() == ["reached", "started"]

    def test_the_periodic_task_purges(self, settings: Any) -> None:
        conversation(100, "old")
        assert purge_task.enqueue().return_value == {
            "conversations": 0,
            "messages": 0,
            "attachments": 0,
            "trashed": 0,
        }
        settings.LLM_CONVERSATIONS = {
            **settings.LLM_CONVERSATIONS,
            "CONVERSATION_RETENTION_DAYS": 7,
        }
        assert purge_task.enqueue().return_value == {
            "conversations": 1,
            "messages": 2,
            "attachments": 0,
            "trashed": 0,
        }
        assert not Conversation.objects.exists()
        assert not Feedback.objects.exists()


@requires_postgresql
@pytest.mark.django_db(transaction=True)
def test_purge_under_concurrent_appends_loses_nothing_recent() -> None:
    """Appends to recent conversations while old ones are purged: every recent one stays
    with every message."""
    old = [conversation(60, f"old{n}", messages=1) for n in range(30)]
    recent = [conversation(1, f"new{n}", messages=1) for n in range(5)]
    cutoff = timezone.now() - timedelta(days=30)
    errors: list[BaseException] = []

    def append() -> None:
        try:
            for round_ in range(10):
                for item in recent:
                    append_messages(item, [ChatMessage.assistant(f"r{round_}")])
                    append_messages(item, [ChatMessage.user(f"u{round_}")])
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    writer = threading.Thread(target=append)
    writer.start()
    deleted = purge_idle_conversations(cutoff, batch_size=4)
    writer.join()
    assert errors == []
    assert deleted.conversations == len(old)
    assert sorted(titles()) == sorted(f"new{n}" for n in range(5))
    assert Message.objects.count() == 5 * 21
