"""Deadlines that hold whatever the provider sends, over real sockets.

A stream that keeps its connection busy (keep-alive comments, ``event: ping``,
one character at a time) resets the provider's per-read ``TIMEOUT`` forever;
only the run's own ``RUN_TIMEOUT`` and a cancel can end it. Each case plays
such a stream from the fake provider server and checks that the run ends by
its deadline (or its cancel) in wall time, its conversation valid and usable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Run
from llm_conversations.runs import ToolLoopService

from .conftest import BACKENDS, Configure
from .server import OK_TEXT, Action, Exchange, FakeProvider

pytestmark = pytest.mark.django_db(transaction=True)

RUN_TIMEOUT = 1.5
KEEPALIVE_SECONDS = 0.2


def busy(beat: Callable[[Exchange], bytes]) -> Action:
    """Send the stream's head, then ``beat(ex)`` every KEEPALIVE_SECONDS until the test ends."""

    def act(ex: Exchange) -> None:
        rendered = ex.render("")
        ex.head(200, rendered.content_type)
        # Bounded, so a run that ignores its deadline fails the test instead of hanging it.
        until = time.monotonic() + 10 * RUN_TIMEOUT
        while time.monotonic() < until and not ex.stop.wait(KEEPALIVE_SECONDS):
            ex.write(beat(ex))

    return act


def comment(ex: Exchange) -> bytes:
    # Ollama streams NDJSON: blank lines are its only keep-alive.
    return b"\n" if ex.protocol.name == "ollama" else b": keep-alive\n\n"


def ping(ex: Exchange) -> bytes:
    if ex.protocol.name == "ollama":
        return b"\n"
    return b'event: ping\ndata: {"type": "ping"}\n\n'


def drip(ex: Exchange) -> bytes:
    """One character of text per beat, in the protocol's own chunk."""
    lines = ex.protocol.stream("x", (), "stop").body.splitlines(keepends=True)
    # NDJSON: the text's own line; SSE: the text event's data line, then its blank line.
    return lines[-1] if ex.protocol.name == "ollama" else lines[-2] + b"\n"


STREAMS = {"keep-alive comments": comment, "ping events": ping, "a drip of text": drip}


def silent(ex: Exchange) -> None:
    """The stream's head, then nothing until the test ends: a model thinking in silence,
    whose call only the provider's ``TIMEOUT`` would end."""
    ex.head(200, ex.render("").content_type)
    ex.stop.wait(10 * RUN_TIMEOUT)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", STREAMS)
def test_a_busy_stream_ends_at_the_runs_deadline(
    backend: str, kind: str, fake: FakeProvider, configure: Configure, settings: Any
) -> None:
    # A TIMEOUT well above the deadline: only RUN_TIMEOUT may end the call, even on
    # a loaded machine where a beat arrives late.
    configure(backend, MAX_RETRIES=0, TIMEOUT=5.0)
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "RUN_TIMEOUT": RUN_TIMEOUT}
    fake.play([busy(STREAMS[kind])])
    conversation = create_conversation()
    service = ToolLoopService(backend)
    started = time.monotonic()
    run = service.start(conversation, "hello")
    events = list(service.events(run.pk))
    elapsed = time.monotonic() - started
    run.refresh_from_db()
    assert (run.status, run.termination_reason) == ("failed", "timeout")
    assert run.error_type == "RunStateError"
    # Bounded by the deadline, not by what the provider keeps sending.
    assert RUN_TIMEOUT <= elapsed < RUN_TIMEOUT + 2.0
    assert type(events[-1]).__name__ == "RunFailed"
    assert check_sequence(load_messages(conversation)) == ()
    # The conversation takes the next run.
    fake.heal()
    assert service.send(conversation, "again").status == "completed"
    assert load_messages(conversation)[-1].content == OK_TEXT


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("stream", [busy(comment), silent], ids=["busy", "silent"])
def test_a_cancel_ends_a_streamed_call_at_once(
    backend: str, stream: Action, fake: FakeProvider, configure: Configure
) -> None:
    configure(backend, MAX_RETRIES=0, TIMEOUT=5.0)
    fake.play([stream])
    conversation = create_conversation()
    service = ToolLoopService(backend)
    run = service.start(conversation, "hello")
    finished = threading.Event()

    def work() -> None:
        try:
            list(service.events(run.pk))
        finally:
            # A thread's connection is its own: left open, it outlives the test database.
            connections.close_all()
            finished.set()

    worker = threading.Thread(target=work)
    worker.start()
    deadline = time.monotonic() + 5
    while not fake.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.requests, "the provider was never called"
    cancelled_at = time.monotonic()
    ToolLoopService().cancel(run.pk)
    # The heartbeat sees the cancel within about a second, and the execution ends then,
    # whether bytes arrive (the call stops at the next) or not (it is left to its timeout).
    assert finished.wait(5)
    assert time.monotonic() - cancelled_at < 3.0
    worker.join(5)
    assert Run.objects.get(pk=run.pk).status == "cancelled"
    assert check_sequence(load_messages(conversation)) == ()


@pytest.mark.parametrize("backend", ["openai", "gemini"])
def test_a_whole_reply_held_open_past_the_deadline_is_still_kept(
    backend: str, fake: FakeProvider, configure: Configure, settings: Any
) -> None:
    from .test_faults import held_after_the_end

    # The provider's TIMEOUT is above the deadline: the stall ends at RUN_TIMEOUT,
    # after the whole reply and its usage arrived. It was paid for: it is kept.
    configure(backend, MAX_RETRIES=0, TIMEOUT=5.0)
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "RUN_TIMEOUT": RUN_TIMEOUT}
    fake.play([held_after_the_end])
    conversation = create_conversation()
    service = ToolLoopService(backend)
    run = service.start(conversation, "hello")
    list(service.events(run.pk))
    run.refresh_from_db()
    assert (run.status, run.termination_reason) == ("completed", "completed")
    assert load_messages(conversation)[-1].content == OK_TEXT
