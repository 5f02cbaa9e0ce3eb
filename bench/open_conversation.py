"""Open a 300-message conversation as the demo page and an AI SDK app do.

Prints the server time (in process, Django's test client) of what opening
costs: the demo page's requests (the conversation, its newest 50 messages,
the sidebar), and the AI SDK history (``chat/messages/``, the whole
conversation as ``UIMessage[]``). The baseline is the demo's old opening, the
first 100 messages in order (which also missed the newest 200). Target: under
200 ms. Runs on the demo's database settings (``DATABASE_URL`` for PostgreSQL)
in a throwaway test database.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import setup_test_environment

from bench.load_conversation import history
from llm_conversations.conversations import create_conversation

SIZE = 300
ROUNDS = 30


def timed(client: Client, urls: list[str]) -> float:
    """Median seconds of fetching ``urls`` one after another, as one opening."""
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, response.content[:200]
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    setup_test_environment()
    settings.DEBUG = False
    old_name = connection.creation.create_test_db(verbosity=0)
    try:
        user = User.objects.create_user("bench")
        conversation = create_conversation(owner=user, messages=history(SIZE))
        client = Client()
        client.force_login(user)
        base = f"/api/conversations/{conversation.pk}"
        sidebar = "/api/conversations/?ordering=-updated_at"
        openings = {
            "old demo (first 100, oldest first)": [
                f"{base}/messages/?limit=100&order=asc",
                f"{base}/",
                sidebar,
            ],
            "demo (newest 50)": [f"{base}/", f"{base}/messages/?order=desc&limit=50", sidebar],
            "AI SDK history (all 300)": [f"{base}/chat/messages/"],
        }
        for urls in openings.values():
            timed(client, urls)  # warm up
        print(f"database: {connection.vendor}; a {SIZE}-message conversation, median of {ROUNDS}")
        baseline = None
        for name, urls in openings.items():
            seconds = timed(client, urls)
            baseline = baseline or seconds
            print(f"  {name:<36} {seconds * 1000:7.2f} ms   ratio {seconds / baseline:5.2f}x")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
