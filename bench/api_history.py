"""Read a 1,000-message history page by page through the API.

Prints requests per second, latency per page and the cost per message of the
whole history for the message list endpoint against a baseline view that
returns the same rows, paged the same way, with ``values()`` and
``JsonResponse``; then the ratio. ``--size N`` reads an N-message history
instead (``--size 5000``: the cost per message of a long one). Both go through
the same middleware, session authentication and owner check, in process
(Django's test client). Runs on the demo project's database settings
(``DATABASE_URL`` for PostgreSQL) in a throwaway test database.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.test import Client
from django.test.utils import override_settings, setup_test_environment
from django.urls import include, path

from bench.load_conversation import history
from llm_conversations.api.representations import MESSAGE_COLUMNS
from llm_conversations.conversations import create_conversation
from llm_conversations.models import Conversation, Message

SIZE = int(sys.argv[sys.argv.index("--size") + 1]) if "--size" in sys.argv else 1000


def baseline(request: HttpRequest, pk: str) -> JsonResponse:
    """The same page of rows as plain ``values()`` dicts."""
    if not request.user.is_authenticated:
        return JsonResponse({"error": "not authenticated"}, status=403)
    conversation = Conversation.objects.get(pk=pk, owner=request.user)
    limit = int(request.GET.get("limit", 20))
    rows = Message.objects.filter(conversation_id=conversation.pk)
    after = request.GET.get("after")
    if after:
        position = rows.filter(pk=after).values_list("position", flat=True).get()
        rows = rows.filter(position__gt=position)
    page = list(rows.order_by("position").values(*MESSAGE_COLUMNS)[: limit + 1])
    data = page[:limit]
    return JsonResponse(
        {
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": len(page) > limit,
        }
    )


urlpatterns = [
    path("api/", include("llm_conversations.api.urls")),
    path("baseline/<str:pk>/", baseline),
]


def read_all(client: Client, url: str, limit: int, latencies: list[float]) -> int:
    """Page through the whole history; return the number of messages read."""
    after: str | None = None
    read = 0
    while True:
        params: dict[str, Any] = {"limit": limit, "order": "asc"}
        if after:
            params["after"] = after
        started = time.perf_counter()
        response = client.get(url, params)
        latencies.append(time.perf_counter() - started)
        assert response.status_code == 200, response.content[:200]
        body = response.json()
        read += len(body["data"])
        if not body["has_more"]:
            return read
        after = body["last_id"]


def measure(read: Callable[[list[float]], int], rounds: int) -> tuple[float, list[float]]:
    """Seconds per whole history (best round) and every request's latency."""
    latencies: list[float] = []
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        assert read(latencies) == SIZE
        best = min(best, time.perf_counter() - started)
    return best, latencies


def report(name: str, best: float, latencies: list[float]) -> None:
    ordered = sorted(latencies)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    print(
        f"  {name:<9} {len(latencies) / sum(latencies):7.0f} req/s   "
        f"latency mean {statistics.mean(latencies) * 1000:6.2f} ms  "
        f"p50 {statistics.median(latencies) * 1000:6.2f} ms  p95 {p95 * 1000:6.2f} ms   "
        f"whole history {best * 1000:7.1f} ms ({best / SIZE * 1000:.3f} ms per message)"
    )


def main() -> None:
    setup_test_environment()
    settings.DEBUG = False  # no query log: it would cost both sides memory and time
    old_name = connection.creation.create_test_db(verbosity=0)
    try:
        with override_settings(ROOT_URLCONF=__name__):
            user = User.objects.create_user("bench")
            conversation = create_conversation(owner=user, messages=history(SIZE))
            client = Client()
            client.force_login(user)
            api_url = f"/api/conversations/{conversation.pk}/messages/"
            base_url = f"/baseline/{conversation.pk}/"
            print(f"database: {connection.vendor}; {SIZE:,} messages read page by page")
            for limit in (20, 100):
                rounds = max(2, 10_000 // SIZE)
                for url in (api_url, base_url):  # warm up both
                    read_all(client, url, limit, [])
                base, base_latencies = measure(
                    lambda lat, limit=limit: read_all(client, base_url, limit, lat), rounds
                )
                ours, api_latencies = measure(
                    lambda lat, limit=limit: read_all(client, api_url, limit, lat), rounds
                )
                print(f"limit={limit} ({-(-SIZE // limit)} pages):")
                report("baseline", base, base_latencies)
                report("API", ours, api_latencies)
                print(f"  ratio (API / baseline, whole history): {ours / base:.2f}x")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
