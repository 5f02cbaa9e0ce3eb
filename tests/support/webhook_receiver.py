"""A webhook receiver on 127.0.0.1 for the webhook tests: it records each request,
answers with the statuses a test sets, and checks signatures as a host would."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from django.utils import timezone

from llm_conversations.core.webhook_signing import new_secret, verify
from llm_conversations.models import WebhookDelivery
from tests.support.http_server import LocalHTTPServer, serving, stop_event

__all__ = ["OWNER_SECRET", "SECRET", "Clock", "Receiver", "hooks", "queued", "receiver"]

SECRET = new_secret()
OWNER_SECRET = new_secret()


@dataclass
class Receiver:
    """What the receiver was sent, and the statuses it answers with, in order (then 200).

    ``drip`` seconds: the response's headers trickle in a byte every 0.05 s for
    that long, so no single read waits long enough to time out. ``arrived`` is
    set when a request comes, ``most_at_once`` counts requests in flight together,
    and ``during`` (if set) is called in the receiver's thread while a request waits.
    """

    statuses: list[int] = field(default_factory=list)
    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    hang: bool = False
    drip: float = 0.0
    during: Callable[[], None] | None = None
    arrived: threading.Event = field(default_factory=threading.Event)
    in_flight: int = 0
    most_at_once: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, handler: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.requests.append(({k.lower(): v for k, v in handler.headers.items()}, handler.body))
            status = self.statuses.pop(0) if self.statuses else 200
            self.in_flight += 1
            self.most_at_once = max(self.most_at_once, self.in_flight)
        self.arrived.set()
        try:
            self._answer(handler, status)
        finally:
            with self.lock:
                self.in_flight -= 1

    def _answer(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        if self.during is not None:
            self.during()
        if self.hang:
            stop_event(handler).wait(5)
            return
        if self.drip:
            handler.wfile.write(f"HTTP/1.0 {status} OK\r\nx-drip: ".encode())
            ends = time.monotonic() + self.drip
            while time.monotonic() < ends and not stop_event(handler).wait(0.05):
                handler.wfile.write(b"z")
                handler.wfile.flush()
            handler.wfile.write(b"\r\ncontent-length: 0\r\n\r\n")
            return
        handler.send_response(status)
        if status == 302:
            handler.send_header("location", "/elsewhere")
        handler.send_header("content-length", "2")
        handler.end_headers()
        handler.wfile.write(b"ok")

    def payloads(self, secret: str = SECRET) -> list[dict[str, Any]]:
        """Each body, once its signature is checked as a receiver checks it."""
        now = timezone.now().timestamp()
        for headers, body in self.requests:
            assert verify(secret, headers, body, now=now), "bad signature"
        return [json.loads(body) for _, body in self.requests]


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, LocalHTTPServer]]:
    state = Receiver()
    with serving(state.respond) as server:
        yield state, server


@pytest.fixture
def hooks(settings: Any, receiver: tuple[Receiver, LocalHTTPServer]) -> Receiver:
    """A ``WEBHOOKS`` endpoint at the receiver, which 127.0.0.1 may reach."""
    state, server = receiver
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "WEBHOOKS": {"ops": {"URL": server.root + "/hooks", "SECRET": SECRET}},
        "WEBHOOK_ALLOWED_HOSTS": ["127.0.0.1"],
    }
    return state


class Clock:
    """An injected clock the test moves."""

    def __init__(self) -> None:
        self.now = timezone.now()

    def __call__(self) -> datetime:
        return self.now


def queued(settings: Any) -> WebhookDelivery:
    """A pending delivery to the ``ops`` endpoint, due now."""
    return WebhookDelivery.objects.create(
        endpoint_name="ops",
        event="run.completed",
        payload={"type": "run.completed"},
        next_attempt_at=timezone.now() - timedelta(seconds=1),
    )
