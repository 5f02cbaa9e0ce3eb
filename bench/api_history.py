"""Read a 1,000-message history page by page through the API, against the floor.

Two floors, measured in the same run. The first is the raw fetch plus JSON
encoding of the same rows: a cursor fetch of the page's 23 columns and
``json.dumps`` of them, in process, no request. The second is the same fetch
and encoding as a plain Django view behind the same middleware, session
authentication and owner check, so it pays the request's fixed cost too. The
API's message list is read page by page (``limit=20`` and ``limit=100``), and
each reader keeps its fastest round of CPU time; the ratios are printed
(targets: a page of 100 at most 3x the request floor; a whole history at
most 0.03 ms per message). ``--size N`` reads an N-message history instead.
Runs on the demo project's database settings (``DATABASE_URL`` for
PostgreSQL) in a throwaway test database, through Django's test client.
"""

from __future__ import annotations

import json
import os
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
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import Client
from django.test.utils import override_settings, setup_test_environment
from django.urls import include, path

from bench.load_conversation import history
from llm_conversations.api.representations import MESSAGE_COLUMNS
from llm_conversations.conversations import create_conversation
from llm_conversations.models import Conversation, Message

SIZE = int(sys.argv[sys.argv.index("--size") + 1]) if "--size" in sys.argv else 1000


def page_rows(conversation_pk: Any, after: str | None, limit: int) -> list[tuple[Any, ...]]:
    """The floor's fetch: the page's rows by a plain cursor, as the database returns them."""
    table = Message._meta.db_table
    columns = ", ".join(f'"{Message._meta.get_field(name).column}"' for name in MESSAGE_COLUMNS)
    where = "conversation_id = %s"
    params: list[Any] = [conversation_pk.hex if connection.vendor == "sqlite" else conversation_pk]
    if after:
        where += f" AND position > (SELECT position FROM {table} WHERE id = %s)"
        params.append(after.replace("-", "") if connection.vendor == "sqlite" else after)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM {table} WHERE {where} ORDER BY position LIMIT %s",
            [*params, limit + 1],
        )
        return cursor.fetchall()


def encoded(rows: list[tuple[Any, ...]], limit: int) -> bytes:
    """The floor's encoding: the rows as JSON objects, ids and times as text."""
    data = [dict(zip(MESSAGE_COLUMNS, row, strict=True)) for row in rows[:limit]]
    last_id = str(uuid.UUID(str(data[-1]["id"])))
    return json.dumps(
        {"data": data, "has_more": len(rows) > limit, "last_id": last_id}, default=str
    ).encode()


def floor_view(request: HttpRequest, pk: str) -> HttpResponse:
    """The request floor: the raw fetch and encoding behind the same owner check."""
    if not request.user.is_authenticated:
        return JsonResponse({"error": "not authenticated"}, status=403)
    conversation = Conversation.objects.get(pk=pk, owner=request.user)
    limit = int(request.GET.get("limit", 20))
    rows = page_rows(conversation.pk, request.GET.get("after"), limit)
    return HttpResponse(encoded(rows, limit), content_type="application/json")


urlpatterns = [
    path("api/", include("llm_conversations.api.urls")),
    path("floor/<str:pk>/", floor_view),
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
        body = json.loads(response.content)
        read += len(body["data"])
        if not body["has_more"]:
            return read
        after = body["last_id"]


def fetch_all(conversation_pk: Any, limit: int, latencies: list[float]) -> int:
    """The in-process floor: every page fetched and encoded, no request."""
    after: str | None = None
    read = 0
    while True:
        started = time.perf_counter()
        rows = page_rows(conversation_pk, after, limit)
        body = encoded(rows, limit)
        latencies.append(time.perf_counter() - started)
        read += min(len(rows), limit)
        if len(rows) <= limit:
            return read
        after = json.loads(body)["last_id"]


def measure(readers: dict[str, Callable[[list[float]], int]], rounds: int) -> dict[str, float]:
    """CPU seconds per whole history of each reader: its fastest round, the
    readers taking turns round after round so a drifting machine moves all alike."""
    best = dict.fromkeys(readers, float("inf"))
    for _ in range(rounds):
        for name, read in readers.items():
            started = time.process_time()
            assert read([]) == SIZE
            best[name] = min(best[name], time.process_time() - started)
    return best


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
            floor_url = f"/floor/{conversation.pk}/"
            print(f"database: {connection.vendor}; {SIZE:,} messages read page by page, CPU time")
            for limit in (20, 100):
                pages = -(-SIZE // limit)
                readers: dict[str, Callable[[list[float]], int]] = {
                    "floor": lambda lat, limit=limit: fetch_all(conversation.pk, limit, lat),
                    "floor view": lambda lat, limit=limit: read_all(client, floor_url, limit, lat),
                    "API": lambda lat, limit=limit: read_all(client, api_url, limit, lat),
                }
                for read in readers.values():  # warm up
                    read([])
                best = measure(readers, rounds=max(3, 20_000 // SIZE))
                print(f"limit={limit} ({pages} pages):")
                for name, seconds in best.items():
                    print(
                        f"  {name:<10} per page {seconds / pages * 1000:6.2f} ms   whole history "
                        f"{seconds * 1000:7.1f} ms ({seconds / SIZE * 1000:.4f} ms per message)"
                    )
                print(
                    f"  API / floor view {best['API'] / best['floor view']:.2f}x   "
                    f"API / floor {best['API'] / best['floor']:.2f}x"
                )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
