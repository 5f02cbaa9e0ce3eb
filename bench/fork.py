"""Fork a 5,000-message conversation.

Prints the median time and the queries of ``runs.forks.fork`` (one
``INSERT ... SELECT`` in the store) for 50 and 5,000 messages, against a
baseline that copies the same rows through Python: one read, then
``bulk_create`` in batches of 1,000 (what the ORM offers without raw SQL),
and the ratio of the two. Runs on the demo project's database settings
(``DATABASE_URL`` for PostgreSQL) in a throwaway test database.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext, setup_test_environment

from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.models import Conversation, Message
from llm_conversations.runs.forks import fork

ROUNDS = 7
SIZES = (50, 5000)


def history(length: int) -> list[ChatMessage]:
    """User, assistant call, tool result, assistant answer, repeated: a valid history."""
    turns: list[ChatMessage] = []
    for n in range(length // 4):
        call = ToolCall(f"c{n}", "get_weather", {"city": f"city {n}"})
        turns += [
            ChatMessage.user(f"question {n} " * 8),
            ChatMessage.assistant_tool_calls([call]),
            ChatMessage.tool_result(call.id, f"result {n} " * 8),
            ChatMessage.assistant(f"answer {n} " * 8),
        ]
    return turns


def baseline(source: Conversation) -> Conversation:
    """The same copy through Python: read every row, bulk_create the copies."""
    with transaction.atomic():
        copy = Conversation.objects.create(
            owner=source.owner,
            title=source.title,
            forked_from=source,
            forked_at_position=source.message_count,
            message_count=source.message_count,
        )
        rows = [
            Message(**{**values, "id": uuid.uuid4(), "conversation_id": copy.pk, "run_id": None})
            for values in Message.objects.filter(conversation=source).values()
        ]
        Message.objects.bulk_create(rows, batch_size=1000)
    return copy


def measure(make: Callable[[], Any]) -> tuple[float, int]:
    """Median seconds over ROUNDS, and the queries of one more."""
    make()  # warm up
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        make()
        times.append(time.perf_counter() - started)
    with CaptureQueriesContext(connection) as queries:
        make()
    return statistics.median(times), len(queries)


def main() -> None:
    setup_test_environment()
    settings.DEBUG = False
    old_name = connection.creation.create_test_db(verbosity=0)
    try:
        owner = User.objects.create_user("bench")
        print(f"database: {connection.vendor}")
        for size in SIZES:
            source = create_conversation(owner=owner, title="long", messages=history(size))
            forked, fork_queries = measure(lambda source=source: fork(source))
            copied, copy_queries = measure(lambda source=source: baseline(source))
            print(
                f"{source.message_count:>5} messages: fork {forked * 1000:7.1f} ms "
                f"({fork_queries} queries); Python bulk copy {copied * 1000:7.1f} ms "
                f"({copy_queries} queries); ratio {forked / copied:.2f}"
            )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
