"""What one run costs the app: CPU, SQL statements and commits, beside the floor.

The run: two model rounds and one tool (the model calls ``get_time``, then
answers), started with ``POST runs/`` through the app's own API (Django's
test client, a session login), on SQLite, against a fake OpenAI-compatible
provider in a subprocess (its CPU is not counted). Measured per run, in this
process (every thread of it, the provider stream's reader included), the
variants interleaved:

- ``not streamed``: the answer is the run (201); the engine streams from the
  provider and logs the text all the same;
- ``streamed``: ``stream: true``, the run's Server-Sent Events read to the end;
- ``floor``: the same two provider calls with plain httpx, and the four rows a
  run must keep (the user turn, the reply with its call, the tool result, the
  answer) written in one transaction with raw INSERTs.

Printed: the median CPU per run of each, the statements and commits of one
run, and the targets: at most 15 statements and 4 commits, CPU at most 15 ms
not streamed, streamed at most 1.25 times not streamed.

Usage: ``python bench/run_cost.py [--runs 40] [--pieces 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")
TARGETS = {"statements": 15, "commits": 4, "cpu_ms": 15.0, "streamed_ratio": 1.25}


# The fake provider (a subprocess) ---------------------------------------------


def reply(body: dict[str, Any], pieces: int) -> tuple[bytes, str]:
    """A call of ``get_time`` until a tool result is in, then a short answer; as the
    body asks (a stream of ``pieces`` text chunks, or whole)."""
    answered = body["messages"][-1]["role"] == "tool"
    usage = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
    text = "It is noon in Paris now."
    call = {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function"}
    call["function"] = {"name": "get_time", "arguments": "{}"}
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": text if answered else None}
        if not answered:
            message["tool_calls"] = [call]
        choice = {"index": 0, "message": message}
        choice["finish_reason"] = "stop" if answered else "tool_calls"
        data = {"id": "c", "object": "chat.completion", "model": "m", "choices": [choice]}
        return json.dumps({**data, "usage": usage}).encode(), "application/json"
    head = {"id": "c", "object": "chat.completion.chunk", "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant"})]
    if answered:
        size = -(-len(text) // pieces)
        chunks += [chunk({"content": text[i : i + size]}) for i in range(0, len(text), size)]
        chunks.append(chunk({}, "stop"))
    else:
        chunks.append(chunk({"tool_calls": [{"index": 0, **call}]}))
        chunks.append(chunk({}, "tool_calls"))
    chunks.append({**head, "choices": [], "usage": usage})
    events = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
    return events + b"data: [DONE]\n\n", "text/event-stream"


def stored_calls(message: dict[str, Any]) -> str | None:
    """A reply's calls as the message table keeps them (arguments decoded)."""
    calls = message.get("tool_calls")
    if not calls:
        return None
    return json.dumps(
        [
            {
                **c,
                "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])},
            }
            for c in calls
        ]
    )


def serve(port: int, pieces: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # kept alive: the app and the floor reuse connections

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            data, kind = reply(body, pieces)
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


# The app's side -----------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="runs of each variant")
    parser.add_argument("--pieces", type=int, default=3, help="text chunks of the answer")
    parser.add_argument("--sql", action="store_true", help="print one run's statements")
    parser.add_argument("--profile", action="store_true", help="profile the not streamed runs")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.pieces)
        return
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--pieces", str(args.pieces)]
    )
    try:
        time.sleep(0.5)
        measure(f"http://127.0.0.1:{port}/v1", args.runs, args.sql, args.profile)
    finally:
        server.terminate()
        server.wait()


def measure(base_url: str, runs: int, show_sql: bool, profile: bool) -> None:
    import logging

    import django

    django.setup()
    logging.getLogger("llm_conversations").setLevel(logging.WARNING)
    import httpx
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    from llm_conversations.conversations import create_conversation

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0)
    settings = {
        "PROVIDERS": {
            "bench": {"BACKEND": "openai", "MODEL": "m", "BASE_URL": base_url, "MAX_RETRIES": 0}
        },
        "DEFAULT_PROVIDER": "bench",
        "TOOLS": ["bench.settings.tools.get_time"],
        "BACKGROUND_RUNS": False,
        "RUN_RATE": None,
    }
    try:
        with override_settings(LLM_CONVERSATIONS=settings):
            user = get_user_model().objects.create_user("bench-cost")
            client = Client()
            client.force_login(user)
            provider = httpx.Client()

            def app_run(stream: bool) -> tuple[float, CaptureQueriesContext]:
                conversation = create_conversation(owner=user)
                url = f"/api/conversations/{conversation.pk}/runs/"
                with CaptureQueriesContext(connection) as queries:
                    started = time.process_time()
                    response = client.post(
                        url,
                        {"message": "What time is it?", "stream": stream},
                        content_type="application/json",
                    )
                    body = b"".join(response.streaming_content) if stream else response.content
                    cpu = time.process_time() - started
                assert response.status_code == (200 if stream else 201), body[:300]
                assert b'"completed"' in body, body[:300]
                return cpu, queries

            # The floor's raw INSERT: every column, defaults computed once.
            from llm_conversations.models import Message

            fields = [f for f in Message._meta.concrete_fields]
            defaults = {f.column: f.get_db_prep_save(f.get_default(), connection) for f in fields}
            defaults["created_at"] = defaults["created_at"] or "2026-01-01 00:00:00"
            columns = ", ".join(defaults)
            insert = (
                f"INSERT INTO {Message._meta.db_table} ({columns}) "
                f"VALUES ({', '.join(['%s'] * len(defaults))})"
            )

            def floor_run() -> tuple[float, CaptureQueriesContext]:
                conversation = create_conversation(owner=user)
                with CaptureQueriesContext(connection) as queries:
                    started = time.process_time()
                    messages: list[dict[str, Any]] = [{"role": "user", "content": "Time?"}]
                    tools = [{"type": "function", "function": {"name": "get_time"}}]
                    first = provider.post(
                        f"{base_url}/chat/completions",
                        json={"model": "m", "messages": messages, "tools": tools},
                    ).json()["choices"][0]["message"]
                    messages += [first, {"role": "tool", "tool_call_id": "c", "content": "noon"}]
                    second = provider.post(
                        f"{base_url}/chat/completions", json={"model": "m", "messages": messages}
                    ).json()["choices"][0]["message"]
                    with connection.cursor() as cursor:
                        cursor.execute("BEGIN")
                        for position, message in enumerate([*messages, second]):
                            row = {
                                **defaults,
                                "id": uuid.uuid4().hex,
                                "conversation_id": conversation.pk.hex,
                                "position": position,
                                "role": message["role"],
                                "content": message.get("content") or "",
                                "tool_calls": stored_calls(message),
                                "tool_call_id": message.get("tool_call_id"),
                            }
                            cursor.execute(insert, list(row.values()))
                        cursor.execute("COMMIT")
                    cpu = time.process_time() - started
                return cpu, queries

            variants = {
                "not streamed": lambda: app_run(False),
                "streamed": lambda: app_run(True),
                "floor": floor_run,
            }
            for measure_once in variants.values():  # warm up: imports, caches, connections
                measure_once()
            if show_sql:
                for query in app_run(False)[1].captured_queries:
                    print(query["sql"][:150])
            if profile:
                import cProfile
                import pstats

                profiler = cProfile.Profile()
                profiler.enable()
                for _ in range(runs):
                    app_run(False)
                profiler.disable()
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(60)
                return
            cpu: dict[str, list[float]] = {name: [] for name in variants}
            counted: dict[str, tuple[int, int]] = {}
            for _ in range(runs):
                for name, measure_once in variants.items():
                    seconds, queries = measure_once()
                    cpu[name].append(seconds)
                    sql = [q["sql"] for q in queries.captured_queries]
                    commits = sum(s.startswith("COMMIT") for s in sql)
                    counted[name] = (
                        sum(not s.startswith(TRANSACTION_CONTROL) for s in sql),
                        commits,
                    )
            report(cpu, counted)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def report(cpu: dict[str, list[float]], counted: dict[str, tuple[int, int]]) -> None:
    medians = {name: statistics.median(values) * 1000 for name, values in cpu.items()}
    print(f"{'variant':<14} {'CPU/run ms (median)':>20} {'x floor':>8} {'SQL':>5} {'commits':>8}")
    for name, ms in medians.items():
        statements, commits = counted[name]
        ratio = ms / medians["floor"]
        print(f"{name:<14} {ms:>20.2f} {ratio:>8.1f} {statements:>5} {commits:>8}")
    statements, commits = counted["not streamed"]
    streamed_ratio = medians["streamed"] / medians["not streamed"]
    print()
    print(
        f"targets: SQL statements {statements} (<= {TARGETS['statements']}), "
        f"commits {commits} (<= {TARGETS['commits']}), "
        f"CPU not streamed {medians['not streamed']:.2f} ms (<= {TARGETS['cpu_ms']:g}), "
        f"streamed / not streamed {streamed_ratio:.2f} (<= {TARGETS['streamed_ratio']:g})"
    )


if __name__ == "__main__":
    main()
