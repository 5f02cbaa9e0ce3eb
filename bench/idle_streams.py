"""Idle attached clients: what open event streams with nothing to say cost the web tier.

Starts the web server and reaper of ``bench/load_runs.py`` (no task worker, so
the runs stay queued and their streams idle) on PostgreSQL, starts
``--streams`` background runs, and opens each run's ``events/`` stream from
one async httpx client, as that many browser tabs waiting for a reply would.
Once every stream is open it measures for ``--seconds``: the web tier's
resident memory before the streams and with them (per stream), its CPU as a
share of one core, its database sessions at peak, and whether every stream
stayed open. The streams read their run's log when woken and every
``LISTEN_POLL_SECONDS`` (30 s) in case a wake-up was missed, and send a
heartbeat every ``SSE_HEARTBEAT_SECONDS`` (15 s).

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench \\
        python bench/idle_streams.py [--streams 1000] [--seconds 30] [--web-processes 2] [--web-pool 20]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load_runs import (
    CSRF_TOKEN,
    Topology,
    cluster,
    cpu_seconds,
    create_conversations,
    prepare_database,
    sampling,
    session_cookies,
    tree_rss_kib,
)


@dataclass
class Stream:
    """One idle client: whether its stream opened and is still open, what it got."""

    opened: bool = False
    closed: str = ""
    received: int = 0  # bytes


async def hold(client: Any, url: str, stream: Stream) -> None:
    """Keep one stream open until cancelled, noting why it closed if it did."""
    try:
        async with client.stream("GET", url, headers={"Accept": "text/event-stream"}) as answer:
            if answer.status_code != 200:
                stream.closed = f"HTTP {answer.status_code}"
                return
            stream.opened = True
            async for chunk in answer.aiter_bytes():
                stream.received += len(chunk)
        stream.closed = "the server ended the stream"
    except Exception as exc:
        stream.closed = f"{type(exc).__name__}: {exc}"


async def measure(root: str, urls: list[str], seconds: float, web_pid: int) -> None:
    import httpx

    cookies = await asyncio.to_thread(session_cookies)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(30.0, read=None)
    before_kib = tree_rss_kib(web_pid)
    streams = [Stream() for _ in urls]
    async with httpx.AsyncClient(
        base_url=root,
        cookies=cookies,
        headers={"X-CSRFToken": CSRF_TOKEN},
        limits=limits,
        timeout=timeout,
    ) as client:
        began = time.monotonic()
        holders = [
            asyncio.create_task(hold(client, u, s)) for u, s in zip(urls, streams, strict=True)
        ]
        while sum(s.opened or bool(s.closed) for s in streams) < len(streams):
            if time.monotonic() - began > 120:
                break
            await asyncio.sleep(0.1)
        opening = time.monotonic() - began
        await asyncio.sleep(2)  # the last streams' first reads
        open_kib = tree_rss_kib(web_pid)
        cpu_before, idle_began = cpu_seconds(web_pid), time.monotonic()
        await asyncio.sleep(seconds)
        idle = time.monotonic() - idle_began
        cpu = cpu_seconds(web_pid) - cpu_before
        after_kib = tree_rss_kib(web_pid)
        still_open = sum(s.opened and not s.closed for s in streams)
        for holder in holders:
            holder.cancel()
        await asyncio.gather(*holders, return_exceptions=True)
    opened = sum(s.opened for s in streams)
    per_stream = (max(open_kib, after_kib) - before_kib) / max(1, opened)
    print(f"  streams opened: {opened}/{len(urls)} in {opening:.1f} s")
    print(f"  still open after {idle:.0f} s idle: {still_open}/{len(urls)}")
    print(
        f"  web tier RSS: {before_kib / 1024:.0f} MB without streams, "
        f"{open_kib / 1024:.0f} MB with them, {after_kib / 1024:.0f} MB after {idle:.0f} s: "
        f"{per_stream:.0f} KiB per open stream"
    )
    print(
        f"  web tier CPU while idle: {cpu:.2f} s in {idle:.0f} s ({cpu / idle:.1%} of a core), "
        f"{1000 * cpu / idle / max(1, opened):.3f} ms per stream per second"
    )
    print(f"  bytes received while idle (heartbeats): {sum(s.received for s in streams)}")
    closed = [s.closed for s in streams if s.closed]
    if closed:
        print(f"  closed: {len(closed)}; first: {closed[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000, help="idle clients (1000)")
    parser.add_argument("--seconds", type=float, default=30.0, help="idle time measured (30)")
    parser.add_argument("--web-processes", type=int, default=2, help="uvicorn worker processes (2)")
    parser.add_argument(
        "--web-pool", type=int, default=20, help="each web process's connection pool (20)"
    )
    args = parser.parse_args()
    if not prepare_database():
        return
    from llm_conversations.models import Conversation
    from llm_conversations.runs import ToolLoopService

    logs = Path(tempfile.mkdtemp(prefix="idle_streams-"))
    shape = Topology(workers=0, web_processes=args.web_processes, web_pool=args.web_pool)
    print(
        f"{args.streams} idle event streams (queued runs, no task worker), uvicorn "
        f"({args.web_processes} process(es)), PostgreSQL; logs in {logs}"
    )
    service = ToolLoopService()
    urls = []
    conversations = Conversation.objects.in_bulk(create_conversations(args.streams))
    for conversation_id, conversation in conversations.items():
        run = service.start(conversation, "What time is it?", background=True)
        urls.append(f"/api/conversations/{conversation_id}/runs/{run.pk}/events/")
    with cluster(shape, 1.0, logs) as (group, root), sampling(group) as peaks:
        web = next(c for c in group.children if c.name == "web")
        asyncio.run(measure(root, urls, args.seconds, web.process.pid))
    print(
        f"  database sessions of the web tier at peak: {peaks.by_role.get('web', 0)} "
        f"({args.web_processes} x (pool + LISTEN))"
    )


if __name__ == "__main__":
    main()
