"""Purge 10,000 idle conversations in batches; print the longest transaction and the total.

Each conversation has 6 messages, a completed run with 5 events and a rating,
so a purge deletes 10,000 conversations, 60,000 messages, 10,000 runs, 50,000
events and 10,000 ratings. Each batch of ``purge_conversations`` is one
transaction; the time between batches is that transaction (selecting and
locking the batch, then deleting it with its rows), so the longest of them is
the longest lock any writer could wait for. Options: ``--batch-size N``
(default 100; try 1000 to see the trade-off). Runs on the demo project's
database settings (``DATABASE_URL`` for PostgreSQL) in a throwaway test database.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import setup_test_environment
from django.utils import timezone

from llm_conversations.conversations.retention import (
    CONVERSATION_BATCH_SIZE,
    purge_idle_conversations,
)
from llm_conversations.models import (
    Conversation,
    Feedback,
    Message,
    Run,
    RunEvent,
    RunEventType,
)

CONVERSATIONS = 10_000
MESSAGES = 6
EVENTS = 5


def populate(owner: User) -> None:
    """Valid rows in bulk, 1,000 conversations at a time, all idle for 400 days."""
    for _ in range(CONVERSATIONS // 1000):
        conversations = Conversation.objects.bulk_create(
            Conversation(owner=owner, message_count=MESSAGES) for _ in range(1000)
        )
        runs = Run.objects.bulk_create(
            Run(conversation=c, status="completed", termination_reason="completed")
            for c in conversations
        )
        rows = Message.objects.bulk_create(
            (
                Message(
                    conversation=c,
                    position=p,
                    run=run,
                    role="user" if p % 2 == 0 else "assistant",
                    content=f"turn {p}",
                )
                for c, run in zip(conversations, runs, strict=True)
                for p in range(MESSAGES)
            ),
            batch_size=2000,
        )
        RunEvent.objects.bulk_create(
            (
                RunEvent(run=run, type=RunEventType.TEXT_DELTA, data={"delta": "x"})
                for run in runs
                for _ in range(EVENTS)
            ),
            batch_size=2000,
        )
        Feedback.objects.bulk_create(
            Feedback(message=row, user=owner, rating=1) for row in rows[1::MESSAGES]
        )
    Conversation.objects.update(updated_at=timezone.now() - timedelta(days=400))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=CONVERSATION_BATCH_SIZE)
    batch_size = parser.parse_args().batch_size
    setup_test_environment()
    settings.DEBUG = False
    old_name = connection.creation.create_test_db(verbosity=0)
    try:
        populate(User.objects.create_user("bench"))
        print(
            f"database: {connection.vendor}; {Conversation.objects.count():,} conversations, "
            f"{Message.objects.count():,} messages, {RunEvent.objects.count():,} events"
        )
        batches: list[float] = []
        mark = time.perf_counter()

        def timed(done: int) -> None:
            nonlocal mark
            now = time.perf_counter()
            batches.append(now - mark)
            mark = now

        started = time.perf_counter()
        deleted = purge_idle_conversations(
            timezone.now() - timedelta(days=30), batch_size=batch_size, progress=timed
        )
        total = time.perf_counter() - started
        assert deleted.conversations == CONVERSATIONS, deleted
        assert not Message.objects.exists()
        assert not RunEvent.objects.exists()
        print(
            f"  purged {deleted.conversations:,} conversations ({deleted.messages:,} messages) "
            f"in {len(batches)} batches of {batch_size}: total {total:.2f} s"
        )
        print(
            f"  longest transaction {max(batches) * 1000:.0f} ms, "
            f"median {statistics.median(batches) * 1000:.0f} ms"
        )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
