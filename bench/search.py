"""Search conversations and messages by text through the API.

One user owns 1,000 conversations of 20 messages (20,000 messages), another
user as many; each conversation's text is drawn from a 5,000-word vocabulary.
Prints the latency of ``GET conversations/`` without a search, with a word
found in one conversation, with a word found in every one (each ranked on
PostgreSQL), and of ``GET messages/?search=`` in a 1,000-message
conversation, with the queries each request makes. Runs on the demo project's
database settings (``DATABASE_URL`` for PostgreSQL) in a throwaway test
database; on PostgreSQL it also prints whether the plan uses the search index.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, setup_test_environment

from llm_conversations.conversations.search import SEARCH_INDEX, matching_messages
from llm_conversations.models import Conversation, Message

CONVERSATIONS = 1000
MESSAGES = 20
LONG = 1000
ROUNDS = 20
VOCABULARY = [f"w{n}" for n in range(5000)]


def text(rng: random.Random, *extra: str) -> str:
    return " ".join([*rng.choices(VOCABULARY, k=12), *extra])


def populate(owner: User, rng: random.Random, rare: bool) -> None:
    """Conversations and messages in bulk: valid rows, without the store's per-append cost."""
    conversations = Conversation.objects.bulk_create(
        Conversation(owner=owner, title=f"c{n}", message_count=MESSAGES)
        for n in range(CONVERSATIONS)
    )
    rows = []
    for n, conversation in enumerate(conversations):
        for position in range(MESSAGES):
            extra = ["everywhere"] if position == 1 else []
            if rare and n == 500 and position == 7:
                extra.append("zanzibar")
            rows.append(
                Message(
                    conversation=conversation,
                    position=position,
                    role="user" if position % 2 == 0 else "assistant",
                    content=text(rng, *extra),
                )
            )
    Message.objects.bulk_create(rows, batch_size=2000)


def timed(client: Client, url: str, params: dict[str, Any]) -> tuple[float, int, Any]:
    """Median seconds over ROUNDS requests, the queries of one, and its body."""
    client.get(url, params)  # warm up
    latencies = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        response = client.get(url, params)
        latencies.append(time.perf_counter() - started)
        assert response.status_code == 200, response.content[:200]
    with CaptureQueriesContext(connection) as queries:
        body = client.get(url, params).json()
    return statistics.median(latencies), len(queries), body


def uses_index() -> str:
    sql, params = (
        matching_messages(Message.objects.all(), "zanzibar").values("pk").query.sql_with_params()
    )
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return "uses" if SEARCH_INDEX in plan else "does NOT use"


def main() -> None:
    setup_test_environment()
    settings.DEBUG = False
    old_name = connection.creation.create_test_db(verbosity=0)
    try:
        rng = random.Random(14)
        user = User.objects.create_user("bench")
        populate(user, rng, rare=True)
        populate(User.objects.create_user("other"), rng, rare=False)
        long = Conversation.objects.create(owner=user, title="long", message_count=LONG)
        Message.objects.bulk_create(
            Message(
                conversation=long,
                position=p,
                role="user" if p % 2 == 0 else "assistant",
                content=text(rng, "ferry" if p % 50 == 0 else ""),
            )
            for p in range(LONG)
        )
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        client = Client()
        client.force_login(user)
        total = Message.objects.count()
        print(f"database: {connection.vendor}; {total:,} messages, 2 users")
        cases = [
            ("conversations, no search", "/api/conversations/", {}),
            ("conversations, 1 match", "/api/conversations/", {"search": "zanzibar"}),
            ("conversations, all match", "/api/conversations/", {"search": "everywhere"}),
            (
                "all match, ?ordering=",
                "/api/conversations/",
                {"search": "everywhere", "ordering": "-updated_at"},
            ),
            (
                f"messages of {LONG:,}, search",
                f"/api/conversations/{long.pk}/messages/",
                {"search": "ferry", "limit": 100},
            ),
        ]
        for name, url, params in cases:
            seconds, queries, body = timed(client, url, params)
            found = body.get("count", len(body.get("data", [])))
            print(f"  {name:<28} {seconds * 1000:8.2f} ms  {queries} queries  found {found}")
        if connection.vendor == "postgresql":
            print(f"  the message search {uses_index()} the index {SEARCH_INDEX}")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
