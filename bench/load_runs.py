"""Background runs under load: task workers, an ASGI server, event streams, API reads.

Starts, as subprocesses on 127.0.0.1: a fake OpenAI-compatible provider that
answers each call after ``--latency`` seconds (first one ``get_time`` call,
then text once the tool result is in), the demo project under uvicorn,
``--workers`` task workers (``manage.py db_worker``, or with ``--engine
llm_worker`` ``manage.py llm_worker --concurrency``) and the reaper
(``manage.py reap_runs --loop 2``), all on PostgreSQL (``DATABASE_URL``) with
the settings of ``bench/settings/load_runs.py`` (``LEASE_SECONDS`` 5).

Then ``--runs`` background runs (``POST runs/`` with ``background: true``,
two model rounds and one tool each) are started together, an SSE client
follows each run's ``events/`` stream (resuming with ``Last-Event-ID`` if
dropped), and meanwhile ``GET /api/conversations/`` is sent at a steady pace.
Printed: wall time and runs per second against the ideal for the worker count
(``workers / (2 x latency)``), the delay from an event being stored
(``RunEvent.created_at``) to its client receiving it, lost and duplicated
events (each client against the stored log), lost and duplicated turns (every
conversation valid, one assistant reply per round), the latency of the reads,
and the CPU each process used. Then the same with one worker killed by
SIGKILL half-way (unless ``--no-kill``); every run must still end.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench \\
        python bench/load_runs.py [--runs 200] [--workers 8] [--latency 1.0] [--no-kill] \\
            [--web-processes 1] [--poll 1.0] [--engine llm_worker --concurrency C] \\
            [--pool 20] [--web-pool 20] [--deltas 50]

``--deltas N`` streams each answer in N provider chunks (``--delta-gap``
seconds apart, within the call's ``--latency``): every client checks
it got each delta once and that they make the stored answer, and measures its
time to first token above the provider's first chunk (stamped in it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = "bench.settings.load_runs"
USERNAME = "bench-load"
PASSWORD = "bench-load-password"
# Clients send a session cookie: HTTP basic auth hashes the password on every
# request (PBKDF2, about 0.5 s of CPU each here), which would be all we measured.
CSRF_TOKEN = "benchloadcsrftoken0123456789abcd"
ENDING = {"run.completed", "run.failed", "run.cancelled", "run.requires_action"}
READS_PER_SECOND = 10
BURST_SECONDS = 10
LEASE_SECONDS = 5
REAP_EVERY = 2
STOP_SECONDS = 10.0
START_ATTEMPTS = 3  # a start cut by a transport error is sent again at most this often

TARGETS = (
    "targets: all runs complete with valid conversations; 0 lost or duplicated events; "
    "p95 delivery <= 150 ms; throughput >= 80% of ideal; p95 read latency <= 50 ms; "
    "with --deltas: every delta once, p95 time to first token <= 100 ms above the provider's"
)


# The fake provider ----------------------------------------------------------


def provider_reply(body: dict[str, Any]) -> dict[str, Any]:
    """One ``get_time`` call, or text once the last turn is a tool result."""
    messages = body.get("messages") or []
    answered = bool(messages) and messages[-1].get("role") == "tool"
    usage = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
    if answered:
        message: dict[str, Any] = {"role": "assistant", "content": "It is time."}
        finish = "stop"
    else:
        call = {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": "get_time", "arguments": "{}"},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "model": "bench-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


def provider_stream(reply: dict[str, Any], deltas: int = 0, gap: float = 0.0) -> Iterator[bytes]:
    """The same reply as Chat Completions stream chunks, one piece of the stream at
    a time. With ``deltas``, an answer's text comes in that many content chunks,
    ``gap`` seconds apart, the first starting with the time it is sent
    (``t<epoch seconds>|``), from which a client measures its time to first token
    above the provider's own."""
    choice = reply["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant"}
    pieces: list[str] = []
    if message.get("content"):
        if deltas:
            pieces = [f" w{index}" for index in range(deltas)]
        else:
            delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": 0, **c} for c in message["tool_calls"]]
    base = {"id": reply["id"], "object": "chat.completion.chunk", "model": reply["model"]}

    def chunk(data: dict[str, Any]) -> bytes:
        return f"data: {json.dumps(data)}\n\n".encode()

    yield chunk({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    for index, piece in enumerate(pieces):
        if index:
            time.sleep(gap)
        text = f"t{time.time():.6f}|{piece}" if index == 0 else piece
        yield chunk({**base, "choices": [{"index": 0, "delta": {"content": text}}]})
    yield chunk(
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
    )
    yield chunk({**base, "choices": [], "usage": reply["usage"]}) + b"data: [DONE]\n\n"


def serve_provider(port: int, latency: float, deltas: int, gap: float) -> None:
    """The fake provider's process: every POST answered within ``latency`` seconds
    (a streamed answer in ``deltas`` chunks ``gap`` apart, its last one at
    ``latency``, so every call takes the same time);
    ``GET /calls`` answers how many were made (each is a model call paid for)."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"
        made = 0

        def do_GET(self) -> None:
            data = json.dumps({"calls": Handler.made}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            with lock:
                Handler.made += 1
            reply = provider_reply(body)
            answer = bool(reply["choices"][0]["message"].get("content"))
            time.sleep(latency - (deltas * gap if answer and body.get("stream") else 0.0))
            if body.get("stream"):
                # HTTP/1.0 without a length: the stream ends when the connection closes.
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for piece in provider_stream(reply, deltas, gap):
                    self.wfile.write(piece)
                    self.wfile.flush()
                return
            data, kind = json.dumps(reply).encode(), "application/json"
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        # Every run's call can arrive at once (1,000 with --runs 1000): a short
        # listen queue would refuse connections while the machine is busy.
        request_queue_size = 4096

    server = Server(("127.0.0.1", port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever(poll_interval=0.05)
    server.server_close()


# Processes --------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a live process and its live children (0 if gone).

    Children count for uvicorn with ``--workers``, whose requests its worker
    processes serve.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0.0
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(cpu_seconds(int(child)) for child in children)


def rss_kib(pid: int) -> int:
    """Resident memory of a process (VmRSS), 0 once it is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and its live children (uvicorn's workers)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0
    return rss_kib(pid) + sum(tree_rss_kib(int(child)) for child in children)


def machine_busy() -> tuple[float, float]:
    """Busy and total jiffies of all CPUs since boot (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    killed: bool = False
    cpu: float = 0.0  # CPU seconds since the load began (after start-up)
    cpu_at_start: float = 0.0


@dataclass
class Cluster:
    """The processes of one phase, each in a process group of its own."""

    logs: Path
    env: dict[str, str]
    children: list[Child] = field(default_factory=list)

    def start(self, name: str, command: list[str], env: dict[str, str] | None = None) -> Child:
        log = (self.logs / f"{name}.log").open("ab")
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**self.env, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        child = Child(name, process)
        self.children.append(child)
        return child

    def kill(self, child: Child) -> None:
        child.cpu = cpu_seconds(child.process.pid) - child.cpu_at_start
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.process.pid, signal.SIGKILL)
        child.process.wait()
        child.killed = True

    def mark_cpu(self) -> None:
        for child in self.children:
            child.cpu_at_start = cpu_seconds(child.process.pid)

    def sample_cpu(self) -> None:
        for child in self.children:
            if not child.killed:
                child.cpu = cpu_seconds(child.process.pid) - child.cpu_at_start

    def stop(self) -> None:
        """SIGTERM to every group, then SIGKILL to what still runs after STOP_SECONDS."""
        for child in self.children:
            if child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        for child in self.children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(max(0.0, deadline - time.monotonic()))
        for child in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGKILL)
            child.process.wait()

    def check_alive(self) -> None:
        for child in self.children:
            code = child.process.poll()
            if code is not None and not child.killed:
                raise RuntimeError(
                    f"{child.name} exited with {code}; see {self.logs / (child.name + '.log')}"
                )


@dataclass(frozen=True)
class Topology:
    """What a phase runs: the task workers, the web server and their connection pools.

    ``engine`` is ``db_worker`` (one task at a time per process) or
    ``llm_worker`` (``concurrency`` tasks at once per process); ``pool`` is a
    worker's connection pool, ``web_pool`` a web process's.
    """

    workers: int = 8
    engine: str = "db_worker"
    concurrency: int = 1
    poll: float = 1.0
    web_processes: int = 1
    pool: int = 20
    web_pool: int = 20

    @property
    def slots(self) -> int:
        """Runs the workers execute at once."""
        return self.workers * (self.concurrency if self.engine == "llm_worker" else 1)

    def worker_command(self, python: str) -> list[str]:
        command = [python, "manage.py", self.engine, "--no-startup-delay"]
        if self.engine == "llm_worker":
            return [*command, "--no-reload", "--concurrency", str(self.concurrency)]
        return [*command, "--interval", str(self.poll)]

    def describe(self) -> str:
        if self.engine == "llm_worker":
            workers = f"{self.workers} llm_worker processes (--concurrency {self.concurrency})"
        else:
            workers = f"{self.workers} db_worker processes (--interval {self.poll:g})"
        return (
            f"{workers}, connection pools {self.pool} per worker and {self.web_pool} per web "
            f"process, uvicorn ({self.web_processes} process(es))"
        )


@contextlib.contextmanager
def cluster(
    topology: Topology,
    latency: float,
    logs: Path,
    tool_log: Path | None = None,
    deltas: tuple[int, float] = (0, 0.0),
) -> Iterator[tuple[Cluster, str]]:
    """The provider, web server, workers and reaper of a phase, each named in
    ``pg_stat_activity`` by its role (``application_name``)."""
    provider_port, web_port = free_port(), free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "BENCH_PROVIDER_URL": f"http://127.0.0.1:{provider_port}/v1",
        "BENCH_LEASE_SECONDS": str(LEASE_SECONDS),
        "BENCH_TOOL_LOG": str(tool_log or os.devnull),
        "PYTHONUNBUFFERED": "1",
    }
    group = Cluster(logs, env)
    python = sys.executable
    try:
        group.start(
            "provider",
            [
                *(python, __file__, "--serve-provider", str(provider_port), str(latency)),
                *(str(deltas[0]), str(deltas[1])),
            ],
        )
        group.start(
            "web",
            [
                *(python, "-m", "uvicorn", "project.asgi:application"),
                *("--host", "127.0.0.1", "--port", str(web_port)),
                *("--lifespan", "off", "--no-access-log", "--log-level", "warning"),
                *("--workers", str(topology.web_processes)),
            ],
            {"PGAPPNAME": "bench-web", "BENCH_POOL_SIZE": str(topology.web_pool)},
        )
        worker_env = {"PGAPPNAME": "bench-worker", "BENCH_POOL_SIZE": str(topology.pool)}
        if topology.engine == "llm_worker":
            # A run's thread waiting for a connection is the database setting
            # the pace: it should wait, not fail its run (docs/deployment.md).
            worker_env["BENCH_POOL_TIMEOUT"] = "120"
        for number in range(topology.workers):
            group.start(f"worker{number}", topology.worker_command(python), worker_env)
        group.start(
            "reaper",
            [python, "manage.py", "reap_runs", "--loop", str(REAP_EVERY)],
            {"PGAPPNAME": "bench-reaper", "BENCH_POOL_SIZE": "2"},
        )
        root = f"http://127.0.0.1:{web_port}"
        wait_ready(group, root, provider_port)
        yield group, root
    finally:
        group.stop()


def wait_ready(group: Cluster, root: str, provider_port: int) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while True:
        group.check_alive()
        try:
            # Once with basic auth: the user and its password work.
            httpx.get(f"{root}/api/tools/", auth=(USERNAME, PASSWORD)).raise_for_status()
            with socket.create_connection(("127.0.0.1", provider_port), timeout=1):
                pass
            break
        except (httpx.HTTPError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    time.sleep(2)  # the workers start as fast as the web server; give them a moment


# The load -----------------------------------------------------------------------


@dataclass
class Received:
    """What one run's client got: (event id, event name, wall-clock time received)."""

    conversation: str
    run: str = ""
    events: list[tuple[int | None, str, float]] = field(default_factory=list)
    reconnects: int = 0
    # Starts answered 503 server_busy (every start slot of the process taken
    # for RUN_START_WAIT_SECONDS) and sent again after their Retry-After.
    refused: int = 0
    # Starts cut before their answer named the run, sent again with their key.
    resent: int = 0
    ended: bool = False
    error: str = ""
    # Drop the start's stream after its first event, as a page closed or a
    # network lost would, and reattach on events/ with Last-Event-ID.
    drop: bool = False
    # The last event id received, kept as each event arrives (as EventSource
    # does), so a stream cut in the middle resumes after what it delivered.
    last: int | None = None
    # Each text.delta's text by event id, and the first one's delay after the
    # provider sent its first chunk (the time stamped at its start).
    texts: dict[int, str] = field(default_factory=dict)
    first_token: float | None = None


async def read_events(response: Any, received: Received) -> None:
    """Record a stream's events until it ends (or, for a client that drops its
    stream, until its first one)."""
    event_id: int | None = None
    name = ""
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            at = time.time()
            received.events.append((event_id, name, at))
            if name == "run.running":
                # An attempt after a lost one streams the answer again: the
                # lost attempt's deltas are superseded, the answer is what follows.
                received.texts.clear()
            elif name == "text.delta" and event_id is not None:
                text = json.loads(line[5:])["delta"]
                received.texts[event_id] = text
                if received.first_token is None and text.startswith("t"):
                    received.first_token = at - float(text[1:].split("|", 1)[0])
            if event_id is not None:
                received.last = event_id
            if name in ENDING:
                received.ended = True
            elif received.drop and received.last is not None:
                received.drop = False
                return
        elif not line:
            event_id, name = None, ""


async def follow(client: Any, received: Received, deadline: float, *, attached: bool) -> None:
    """Follow the run's ``events/`` stream after the last event received until an
    ending event.

    Every request counts as a resumed stream, but the first one when the client
    was not ``attached`` to the run's stream yet.
    """
    url = f"/api/conversations/{received.conversation}/runs/{received.run}/events/"
    while not received.ended and time.monotonic() < deadline:
        received.reconnects += attached
        attached = True
        headers = {"Accept": "text/event-stream"}
        if received.last is not None:
            headers["Last-Event-ID"] = str(received.last)
        try:
            async with client.stream("GET", url, headers=headers) as response:
                if response.status_code != 200:
                    received.error = f"events: HTTP {response.status_code}"
                    await asyncio.sleep(0.5)
                    continue
                await read_events(response, received)
        except Exception as exc:  # a dropped stream is resumed
            received.error = f"events: {type(exc).__name__}: {exc}"
        if not received.ended:
            await asyncio.sleep(0.2)


async def start_and_follow(
    client: Any, received: Received, deadline: float, done: asyncio.Queue[None], separately: bool
) -> None:
    """Start a background run and follow its events.

    By default the start asks for the stream (``"stream": true``): the answer
    is the run's event stream from its first event, as the AI SDK's transport
    uses it. ``separately``: the start answers 202 and the client then opens
    ``events/``, a second request after which the events logged meanwhile
    arrive late.
    """
    url = f"/api/conversations/{received.conversation}/runs/"
    body = {"message": "What time is it?", "background": True, "stream": not separately}
    try:
        if separately:
            response = await client.post(url, json=body)
            if response.status_code != 202:
                received.error = f"start: HTTP {response.status_code} {response.text[:200]}"
                return
            received.run = response.json()["id"]
        else:
            # A start cut before its answer named the run is sent again with the
            # same key: the API answers it with the first one's run, not a second.
            headers = {"Accept": "text/event-stream", "Idempotency-Key": received.conversation}
            while not received.run and received.resent < START_ATTEMPTS:
                try:
                    async with client.stream("POST", url, json=body, headers=headers) as response:
                        if response.status_code == 503:
                            # Nothing was stored: send it again when told, as a client should.
                            await response.aread()
                            received.refused += 1
                            await asyncio.sleep(float(response.headers.get("retry-after", 1)))
                            continue
                        if response.status_code != 200:
                            await response.aread()
                            received.error = (
                                f"start: HTTP {response.status_code} {response.text[:200]}"
                            )
                            return
                        # Named before any event: a queued run logs none until claimed.
                        received.run = response.headers["x-run-id"]
                        received.error = ""  # what cut an earlier attempt is behind us
                        await read_events(response, received)
                except Exception as exc:  # a dropped stream is resumed below
                    received.error = f"start stream: {type(exc).__name__}: {exc}"
                    if not received.run:
                        received.resent += 1
                        await asyncio.sleep(0.5)
            if not received.run:
                received.error = received.error or "start: the answer named no run"
                return
        await follow(client, received, deadline, attached=not separately)
    except Exception as exc:
        received.error = f"start: {type(exc).__name__}: {exc}"
    finally:
        done.put_nowait(None)


async def read_steadily(root: str, cookies: dict[str, str], stop: asyncio.Event) -> list[Any]:
    """``GET /api/conversations/`` READS_PER_SECOND times a second until ``stop``.

    Returns ``[seconds since the first read, latency, ok]`` per read.
    """
    import httpx

    reads: list[Any] = []
    tasks: set[asyncio.Task[None]] = set()
    first = time.monotonic()

    async def one(client: httpx.AsyncClient) -> None:
        started = time.monotonic()
        try:
            ok = (await client.get("/api/conversations/")).status_code == 200
        except Exception:
            ok = False
        reads.append([started - first, time.monotonic() - started, ok])

    timeout = httpx.Timeout(30.0, read=60.0)
    async with httpx.AsyncClient(base_url=root, cookies=cookies, timeout=timeout) as client:
        next_at = first
        while not stop.is_set():
            task = asyncio.create_task(one(client))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            next_at += 1 / READS_PER_SECOND
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.monotonic()))
        if tasks:
            await asyncio.wait(tasks)
    return reads


def serve_reads(root: str, sessionid: str) -> None:
    """The reader process: reads until its stdin closes, then prints them as JSON.

    Reads come from a process of their own, as other users' requests would: in
    the client process they would also wait for its event loop, busy with 200
    streams, and measure the client as much as the server.
    """

    async def main() -> list[Any]:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_reader(sys.stdin.fileno(), lambda: sys.stdin.read() or stop.set())
        return await read_steadily(root, {"sessionid": sessionid}, stop)

    print(json.dumps(asyncio.run(main())))


@dataclass
class Peaks:
    """The highest values the sampler saw during a phase."""

    # Database sessions of the phase's processes, in all and by role.
    connections: int = 0
    by_role: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0  # runs with status running
    worker_rss_kib: int = 0  # all workers together
    web_rss_kib: int = 0  # the uvicorn supervisor and its processes


SAMPLE_EVERY = 0.1


def serve_samples(worker_pids: str, web_pid: str) -> None:
    """The sampler process: every SAMPLE_EVERY seconds until its stdin closes, the
    database sessions of the benchmark's roles (``application_name``), the runs
    in flight and the resident memory of the workers and the web tier; then
    prints the peaks as JSON. A process of its own, so its queries do not wait
    for the client's busy event loop."""
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()
    from django.db import connection

    from llm_conversations.models import Run

    pids = [int(pid) for pid in worker_pids.split(",") if pid]
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    peaks = Peaks()
    with connection.cursor() as cursor:
        while not stop.wait(SAMPLE_EVERY):
            cursor.execute(
                "SELECT application_name, count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name IN "
                "('bench-web', 'bench-worker', 'bench-reaper') GROUP BY application_name"
            )
            roles = {name.removeprefix("bench-"): int(n) for name, n in cursor.fetchall()}
            for role, count in roles.items():
                peaks.by_role[role] = max(peaks.by_role.get(role, 0), count)
            peaks.connections = max(peaks.connections, sum(roles.values()))
            peaks.in_flight = max(peaks.in_flight, Run.objects.filter(status="running").count())
            peaks.worker_rss_kib = max(peaks.worker_rss_kib, sum(rss_kib(pid) for pid in pids))
            peaks.web_rss_kib = max(peaks.web_rss_kib, tree_rss_kib(int(web_pid)))
    print(json.dumps(peaks.__dict__))


@contextlib.contextmanager
def sampling(group: Cluster) -> Iterator[Peaks]:
    """Run the sampler process for the block; the peaks are filled in when it ends."""
    workers = ",".join(str(c.process.pid) for c in group.children if c.name.startswith("worker"))
    web = next(c for c in group.children if c.name == "web")
    sampler = subprocess.Popen(
        [sys.executable, __file__, "--serve-samples", workers, str(web.process.pid)],
        cwd=ROOT,
        env={**group.env, "PGAPPNAME": "bench-sampler"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    peaks = Peaks()
    try:
        yield peaks
    finally:
        output, _ = sampler.communicate(b"", timeout=30)
        if output:
            peaks.__dict__.update(json.loads(output))


def pickups(ids: list[str]) -> list[float]:
    """Each of the runs' tasks: the delay from its enqueue to a worker's claim of it."""
    from django_tasks_db.models import DBTaskResult

    rows = DBTaskResult.objects.filter(task_path__endswith="execute_run").values_list(
        "args_kwargs", "enqueued_at", "started_at"
    )
    wanted = set(ids)
    return [
        (started - enqueued).total_seconds()
        for args, enqueued, started in rows
        if args["args"][0] in wanted and started is not None
    ]


def run_starts(runs: dict[str, Any]) -> list[float]:
    """Each run's delay from its first task's enqueue to its own claim (``started_at``,
    when the thread that executes it took it): the pick-up a user waits for."""
    from django_tasks_db.models import DBTaskResult

    first: dict[str, datetime] = {}
    rows = (
        DBTaskResult.objects.filter(task_path__endswith="execute_run")
        .values_list("args_kwargs", "enqueued_at")
        .order_by()
    )
    for args, enqueued in rows:
        run_id = args["args"][0]
        if run_id in runs and (run_id not in first or enqueued < first[run_id]):
            first[run_id] = enqueued
    return [
        (run.started_at - first[run_id]).total_seconds()
        for run_id, run in runs.items()
        if run.started_at is not None and run_id in first
    ]


@dataclass
class Load:
    clients: list[Received]
    wall: float
    reads: list[float]
    read_failures: int
    killed_at: float | None
    began_at: float = 0.0  # time.time() at the first start
    client_cpu: float = 0.0
    # Latencies of the reads made in the first BURST_SECONDS (while the runs
    # are being started) and of those made afterwards.
    burst_reads: list[float] = field(default_factory=list)
    later_reads: list[float] = field(default_factory=list)


def session_cookies() -> dict[str, str]:
    """A logged-in session of the benchmark's user, and a CSRF cookie for its POSTs."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore

    user = User.objects.get(username=USERNAME)
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    assert session.session_key is not None
    return {"sessionid": session.session_key, "csrftoken": CSRF_TOKEN}


async def load(
    root: str,
    conversations: list[str],
    timeout: float,
    kill: Any | None,
    separately: bool,
    drop_share: float = 0.0,
) -> Load:
    import httpx

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout_config = httpx.Timeout(30.0, read=60.0)
    # Every 1/drop_share-th client drops its stream (spread evenly, not by chance).
    clients = [
        Received(c, drop=int((i + 1) * drop_share) > int(i * drop_share))
        for i, c in enumerate(conversations)
    ]
    done: asyncio.Queue[None] = asyncio.Queue()
    killed_at: float | None = None
    cookies = await asyncio.to_thread(session_cookies)
    headers = {"X-CSRFToken": CSRF_TOKEN}
    reader = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve-reads",
        root,
        cookies["sessionid"],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    async with httpx.AsyncClient(
        base_url=root, cookies=cookies, headers=headers, limits=limits, timeout=timeout_config
    ) as runs_client:
        started = time.monotonic()
        began_at = time.time()
        deadline = started + timeout
        followers = [
            asyncio.create_task(start_and_follow(runs_client, c, deadline, done, separately))
            for c in clients
        ]
        finished = 0
        while finished < len(clients):
            try:
                await asyncio.wait_for(done.get(), max(0.1, deadline + 5 - time.monotonic()))
            except TimeoutError:
                break
            finished += 1
            if kill is not None and killed_at is None and finished >= len(clients) // 2:
                kill()
                killed_at = time.monotonic() - started
        wall = time.monotonic() - started
        for task in followers:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
    output, _ = await reader.communicate(b"")
    made = json.loads(output)
    reads = [latency for _, latency, _ in made]
    failures = sum(not ok for _, _, ok in made)
    return Load(
        clients,
        wall,
        reads,
        failures,
        killed_at,
        began_at,
        time.process_time(),
        burst_reads=[latency for at, latency, _ in made if at < BURST_SECONDS],
        later_reads=[latency for at, latency, _ in made if at >= BURST_SECONDS],
    )


# Checking against the database ----------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def ms(value: float) -> str:
    return f"{value * 1000:.0f} ms"


def create_conversations(count: int) -> list[str]:
    from django.contrib.auth.models import User

    from llm_conversations.conversations import create_conversation

    user = User.objects.get(username=USERNAME)
    return [str(create_conversation(owner=user, title=f"load {i}").pk) for i in range(count)]


@dataclass
class Observed:
    """What a phase measured besides its clients' view."""

    busy: float  # the machine's busy share during the load
    client_cpu: float
    model_calls: int
    peaks: Peaks
    idle_worker_kib: int  # all workers' resident memory before the load
    tool_calls: list[str]  # call ids, once per execution of get_time


def report(
    result: Load, group: Cluster, topology: Topology, latency: float, seen: Observed, deltas: int
) -> bool:
    """Print the figures of one phase; return whether it met every target."""
    from llm_conversations.conversations import load_messages
    from llm_conversations.core.messages import Role
    from llm_conversations.core.sequence import check_sequence
    from llm_conversations.models import Run, RunEvent

    clients = result.clients
    runs = {str(r.pk): r for r in Run.objects.filter(pk__in=[c.run for c in clients if c.run])}
    stored: dict[str, list[tuple[int, datetime]]] = {}
    for run_id, event_id, created in (
        RunEvent.objects.filter(run_id__in=list(runs))
        .order_by("id")
        .values_list("run_id", "id", "created_at")
    ):
        stored.setdefault(str(run_id), []).append((event_id, created))

    delays: list[float] = []
    lost = duplicated = clients_short = unnumbered = 0
    for client in clients:
        got = Counter(e[0] for e in client.events if e[0] is not None)
        unnumbered += sum(1 for e in client.events if e[0] is None)
        first_seen: dict[int, float] = {}
        for event_id, _name, at in client.events:
            if event_id is not None:
                first_seen.setdefault(event_id, at)
        log = stored.get(client.run, [])
        missing = sum(1 for event_id, _ in log if event_id not in got)
        lost += missing
        clients_short += bool(missing)
        duplicated += sum(n - 1 for n in got.values() if n > 1)
        for event_id, created in log:
            if event_id in first_seen:
                delays.append(first_seen[event_id] - created.timestamp())

    statuses = Counter(str(r.status) for r in runs.values())
    ended = sum(n for s, n in statuses.items() if s in {"completed", "failed", "cancelled"})
    invalid = bad_turns = texts_wrong = 0
    for client in clients:
        try:
            messages = load_messages(client.conversation)
            # Every delta once, in order, is exactly the stored answer's text.
            streamed = "".join(text for _, text in sorted(client.texts.items()))
            texts_wrong += bool(deltas) and streamed != messages[-1].content
            valid = check_sequence(messages) == ()
        except Exception:
            invalid += 1
            continue
        invalid += not valid
        roles = [m.role for m in messages]
        # One round: user, assistant calling get_time, its result, assistant's answer.
        bad_turns += roles != [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    attempts = Counter(r.attempts for r in runs.values())
    errors = Counter(c.error.split(":")[0] + ": " + c.error for c in clients if c.error)

    total = len(clients)
    slots = min(topology.slots, total)
    ideal = slots / (2 * latency)
    # Until the last run finished, not until every client gave up waiting.
    finished = [r.finished_at.timestamp() for r in runs.values() if r.finished_at]
    until = min(result.wall, max(finished, default=0.0) - result.began_at) or result.wall
    rate = statuses.get("completed", 0) / until
    p50, p95 = percentile(delays, 0.5), percentile(delays, 0.95)
    r50, r95 = percentile(result.reads, 0.5), percentile(result.reads, 0.95)
    waiting = sum(not c.ended and not c.error for c in clients)
    print(
        f"  wall time: {result.wall:.1f} s for {total} runs; the last run finished at "
        f"{until:.1f} s; clients still waiting at the end: {waiting}"
    )
    print(
        f"  throughput: {rate:.2f} runs/s; ideal {ideal:.2f} runs/s "
        f"({slots} runs at once / (2 x {latency:g} s)); ratio {rate / ideal:.0%}"
    )
    print(
        f"  runs: {dict(sorted(statuses.items()))}; ended {ended}/{total}; "
        f"attempts {dict(sorted(attempts.items()))}"
    )
    executing = [
        (r.finished_at - r.started_at).total_seconds()
        for r in runs.values()
        if r.started_at and r.finished_at and r.attempts == 1
    ]
    if executing:
        busy_share = sum(executing) / (slots * result.wall)
        print(
            f"  execution per run (started -> finished, first attempts): "
            f"p50 {ms(percentile(executing, 0.5))}, p95 {ms(percentile(executing, 0.95))} "
            f"(2 x latency = {ms(2 * latency)}); worker slots executing runs "
            f"{busy_share:.0%} of the wall time"
        )
    print(
        f"  delivery delay (stored -> received): p50 {ms(p50)}, p95 {ms(p95)}, "
        f"max {ms(max(delays, default=float('nan')))} over {len(delays)} events"
    )
    print(
        f"  events: {sum(len(v) for v in stored.values())} stored, "
        f"{sum(len(c.events) for c in clients)} received; lost {lost} "
        f"({clients_short} clients short), duplicated {duplicated}, "
        f"without id {unnumbered}; streams resumed {sum(c.reconnects for c in clients)}"
    )
    first_tokens = [c.first_token for c in clients if c.first_token is not None]
    t95 = percentile(first_tokens, 0.95)
    if deltas:
        per_run = [len(c.texts) for c in clients]
        print(
            f"  answers streamed in {deltas} provider chunks: text.delta events per run "
            f"p50 {percentile(per_run, 0.5):.0f}, min {min(per_run, default=0)}; "
            f"streamed text not exactly the stored answer: {texts_wrong} runs"
        )
        print(
            f"  time to first token above the provider's first chunk: "
            f"p50 {ms(percentile(first_tokens, 0.5))}, p95 {ms(t95)}, "
            f"max {ms(max(first_tokens, default=float('nan')))} over {len(first_tokens)} runs"
        )
    refused = [c.refused for c in clients if c.refused]
    print(
        f"  starts refused 503 server_busy and sent again: {sum(refused)} "
        f"(by {len(refused)} clients, at most {max(refused, default=0)} times one); "
        f"cut before naming their run and sent again with their Idempotency-Key: "
        f"{sum(c.resent for c in clients)}"
    )
    # A run is two model calls; one executed again after its worker died pays
    # for the calls it had made again. A dropped client stream must cost none.
    again = sum(r.attempts - 1 for r in runs.values())
    print(
        f"  model calls: {seen.model_calls} for {total} runs (2 a run: {2 * total}; "
        f"runs executed again after their worker died: {again})"
    )
    executions = Counter(seen.tool_calls)
    repeated = sum(n - 1 for n in executions.values())
    print(
        f"  get_time (repeatable=False) executions: {len(seen.tool_calls)} for "
        f"{len(executions)} calls; executed twice: {repeated}"
    )
    waits = pickups([c.run for c in clients if c.run])
    print(
        f"  pick-up (task enqueued -> claimed): p50 {ms(percentile(waits, 0.5))}, "
        f"p95 {ms(percentile(waits, 0.95))}, max {ms(max(waits, default=float('nan')))} "
        f"over {len(waits)} tasks"
    )
    starts = run_starts(runs)
    print(
        f"  run claimed (first task enqueued -> the run's own claim): "
        f"p50 {ms(percentile(starts, 0.5))}, p95 {ms(percentile(starts, 0.95))}, "
        f"max {ms(max(starts, default=float('nan')))}"
    )
    peaks = seen.peaks
    per_run = (peaks.worker_rss_kib - seen.idle_worker_kib) / max(1, peaks.in_flight)
    print(
        f"  worker RSS (all {topology.workers}): {seen.idle_worker_kib / 1024:.0f} MB idle, "
        f"{peaks.worker_rss_kib / 1024:.0f} MB at peak; runs in flight at peak {peaks.in_flight}: "
        f"{per_run:.0f} KiB per run in flight; web tier RSS peak {peaks.web_rss_kib / 1024:.0f} MB"
    )
    print(
        f"  database connections at peak: {peaks.connections} ("
        + ", ".join(f"{role} {n}" for role, n in sorted(peaks.by_role.items()))
        + ")"
    )
    print(
        f"  conversations: {total - invalid}/{total} valid; "
        f"{bad_turns} not exactly user, assistant call, tool result, assistant answer"
    )
    print(
        f"  API reads meanwhile: {len(result.reads)} at {READS_PER_SECOND}/s, "
        f"p50 {ms(r50)}, p95 {ms(r95)}, max {ms(max(result.reads, default=float('nan')))}; "
        f"failed {result.read_failures}"
    )
    print(
        f"    made in the first {BURST_SECONDS} s (runs being started): "
        f"{len(result.burst_reads)}, p50 {ms(percentile(result.burst_reads, 0.5))}, "
        f"p95 {ms(percentile(result.burst_reads, 0.95))}; afterwards: "
        f"{len(result.later_reads)}, p50 {ms(percentile(result.later_reads, 0.5))}, "
        f"p95 {ms(percentile(result.later_reads, 0.95))}"
    )
    workers_cpu = sum(c.cpu for c in group.children if c.name.startswith("worker"))
    cpu = {c.name: c.cpu for c in group.children if not c.name.startswith("worker")}
    cpu["workers (sum)"] = workers_cpu
    print(
        "  CPU seconds (share of the wall time): "
        + ", ".join(f"{name} {sec:.1f} ({sec / result.wall:.0%})" for name, sec in cpu.items())
        + f", this client {seen.client_cpu:.1f} ({seen.client_cpu / result.wall:.0%}); "
        f"machine busy {seen.busy:.0%} of "
        f"{os.cpu_count()} cores"
    )
    per_run = {**cpu, "this client": seen.client_cpu}
    print(
        "  CPU per run: "
        + ", ".join(f"{name} {sec / total * 1000:.1f} ms" for name, sec in per_run.items())
        + f"; the server's tiers together {(sum(cpu.values())) / total * 1000:.1f} ms, "
        f"so {os.cpu_count()} cores run at most "
        f"{total * (os.cpu_count() or 1) / max(sum(cpu.values()), 1e-9):.0f} runs/s"
    )
    if errors:
        print(f"  client errors: {sum(errors.values())}; first: {next(iter(errors))}")
    return (
        statuses.get("completed", 0) == total
        and invalid == 0
        and bad_turns == 0
        and lost == 0
        and duplicated == 0
        and p95 <= 0.150
        and rate >= 0.8 * ideal
        and r95 <= 0.050
        and repeated == 0
        and (not deltas or (texts_wrong == 0 and t95 <= 0.100))
    )


def web_processes(supervisor: int) -> list[int]:
    """The uvicorn worker processes under its supervisor (not its resource tracker)."""
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    return [
        int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


def topology(args: argparse.Namespace) -> Topology:
    """The phase's processes, from the command line."""
    concurrency = args.concurrency or -(-args.runs // args.workers)
    return Topology(
        workers=args.workers,
        engine=args.engine,
        concurrency=concurrency,
        poll=args.poll,
        web_processes=args.web_processes,
        pool=args.pool,
        web_pool=args.web_pool,
    )


def phase(args: argparse.Namespace, logs: Path, kill: bool) -> bool:
    import httpx

    shape = topology(args)
    conversations = create_conversations(args.runs)
    ideal_seconds = args.runs * 2 * args.latency / min(shape.slots, args.runs)
    # Generous: on a small machine the CPU, not the concurrency, sets the pace
    # (two cores finish about ten streamed runs a second).
    timeout = max(120.0, 10 * ideal_seconds + 4 * LEASE_SECONDS, 0.3 * args.runs)
    tool_log = logs / f"tool-calls-{'kill' if kill else 'plain'}.txt"
    tool_log.write_text("")
    with (
        cluster(shape, args.latency, logs, tool_log, (args.deltas, args.delta_gap)) as (
            group,
            root,
        ),
        sampling(group) as peaks,
    ):
        idle_worker_kib = sum(
            rss_kib(c.process.pid) for c in group.children if c.name.startswith("worker")
        )
        busy_before = machine_busy()
        group.mark_cpu()
        client_cpu = time.process_time()

        killed: list[str] = []

        def kill_one() -> None:
            victim = next(c for c in group.children if c.name == "worker0")
            group.kill(victim)
            killed.append("worker0")
            if args.kill_web:
                web = next(c for c in group.children if c.name == "web")
                pid = web_processes(web.process.pid)[0]
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                killed.append(f"web process {pid} (uvicorn starts another)")

        result = asyncio.run(
            load(
                root,
                conversations,
                timeout,
                kill_one if kill else None,
                args.attach_separately,
                args.drop_streams,
            )
        )
        busy_after = machine_busy()
        group.sample_cpu()
        group.check_alive()
        provider = group.env["BENCH_PROVIDER_URL"].removesuffix("/v1")
        model_calls = int(httpx.get(f"{provider}/calls").json()["calls"])
    busy = (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1])
    if result.killed_at is not None:
        print(
            f"  {' and '.join(killed)} killed (SIGKILL) at {result.killed_at:.1f} s, "
            "half the runs ended"
        )
    seen = Observed(
        busy=busy,
        client_cpu=result.client_cpu - client_cpu,
        model_calls=model_calls,
        peaks=peaks,
        idle_worker_kib=idle_worker_kib,
        tool_calls=tool_log.read_text().split(),
    )
    return report(result, group, shape, args.latency, seen, args.deltas)


def prepare_database() -> bool:
    """Set Django up on PostgreSQL, migrate and create the benchmark's user without
    conversations; False (and say why) without PostgreSQL."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        print(
            "skipped: needs PostgreSQL, e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench"
        )
        return False
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django_tasks_db.models import DBTaskResult

    call_command("migrate", verbosity=0)
    from llm_conversations.models import Conversation

    user, _ = User.objects.get_or_create(username=USERNAME)
    user.set_password(PASSWORD)
    user.save()
    # Each invocation starts alike: the conversations of earlier ones would make
    # the reads it measures (a page of the user's conversations) slower each time,
    # and their tasks the pick-up delays it reads.
    Conversation.objects.filter(owner=user).delete()
    DBTaskResult.objects.all().delete()
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument(
        "--engine",
        choices=["db_worker", "llm_worker"],
        default="db_worker",
        help="the task worker command (default db_worker: one run at a time per process)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        help="llm_worker --concurrency (default: the runs divided among the workers)",
    )
    parser.add_argument(
        "--pool", type=int, default=20, help="each worker's connection pool (default 20)"
    )
    parser.add_argument(
        "--web-pool", type=int, default=20, help="each web process's connection pool (default 20)"
    )
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per provider call")
    parser.add_argument("--no-kill", action="store_true", help="skip the phase with a kill")
    parser.add_argument(
        "--attach-separately",
        action="store_true",
        help="start with a 202, then open events/ (default: the start answers the stream)",
    )
    parser.add_argument(
        "--web-processes", type=int, default=1, help="uvicorn worker processes (default 1)"
    )
    parser.add_argument(
        "--poll",
        type=float,
        default=1.0,
        help="seconds db_worker sleeps when its queue is empty (its --interval, default 1)",
    )
    parser.add_argument(
        "--kill-web",
        action="store_true",
        help="in the phase with a kill, also SIGKILL a uvicorn worker process",
    )
    parser.add_argument(
        "--drop-streams",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="share of clients that drop the start's stream after its first event "
        "and reattach on events/ with Last-Event-ID (default 0)",
    )
    parser.add_argument(
        "--deltas",
        type=int,
        default=0,
        metavar="N",
        help="stream each answer in N provider chunks; prints the time to first token "
        "(default 0: the answer in one chunk)",
    )
    parser.add_argument(
        "--delta-gap",
        type=float,
        default=0.01,
        metavar="SECONDS",
        help="seconds between two chunks of a streamed answer (default 0.01); the call "
        "still takes --latency in all",
    )
    parser.add_argument("--serve-provider", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument(
        "--serve-reads", nargs=2, metavar=("ROOT", "SESSION"), help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--serve-samples", nargs=2, metavar=("WORKER_PIDS", "WEB_PID"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.serve_samples:
        serve_samples(*args.serve_samples)
        return
    if args.serve_reads:
        serve_reads(*args.serve_reads)
        return
    if args.serve_provider:
        port, latency, deltas, gap = args.serve_provider
        serve_provider(int(port), float(latency), int(deltas), float(gap))
        return

    if args.deltas * args.delta_gap >= args.latency:
        parser.error("--deltas x --delta-gap must stay under --latency")
    if not prepare_database():
        return
    logs = Path(tempfile.mkdtemp(prefix="load_runs-"))
    print(
        f"{args.runs} background runs (2 model rounds + 1 tool each), {topology(args).describe()}, "
        f"provider latency {args.latency:g} s, PostgreSQL; clients "
        + ("start with a 202, then open events/" if args.attach_separately else "start streaming")
        + (f"; each answer in {args.deltas} deltas" if args.deltas else "")
        + f"; logs in {logs}"
    )
    print(TARGETS)
    print("without failures:")
    met = phase(args, logs, kill=False)
    print(f"  all targets met: {'yes' if met else 'no'}")
    if not args.no_kill:
        print("with one worker killed half-way (LEASE_SECONDS 5, reap_runs every 2 s):")
        met = phase(args, logs, kill=True)
        print(f"  all targets met: {'yes' if met else 'no'}")


if __name__ == "__main__":
    main()
