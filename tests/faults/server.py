"""A fake provider server: plays a script of faults, then answers normally.

One server speaks all four protocols (the request path says which). Each
request takes the next action of the script; when the script is empty the
``fallback`` action answers (a normal reply unless a test makes a fault
repeat). Actions write whatever they like on the raw socket: a status, a
body, half a body, nothing at all.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.http_server import LocalHTTPServer, stop_event

from .wire import Call, Protocol, Rendered, protocol_of

__all__ = ["API_KEY", "OK_TEXT", "SECRET", "Action", "Exchange", "FakeProvider"]

API_KEY = "sk-fault-SECRET-Zq8Xv7Wk"
SECRET = API_KEY.removeprefix("sk-fault-")
OK_TEXT = "All good."
DRIP_SECONDS = 0.3


@dataclass
class Exchange:
    """One request being answered."""

    handler: BaseHTTPRequestHandler
    protocol: Protocol
    stream: bool
    body: dict[str, Any]

    @property
    def stop(self) -> threading.Event:
        return stop_event(self.handler)

    def write(self, data: bytes) -> None:
        self.handler.wfile.write(data)
        self.handler.wfile.flush()

    def head(
        self,
        status: int,
        content_type: str,
        *,
        length: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.handler.send_response(status)
        self.handler.send_header("content-type", content_type)
        if length is not None:
            self.handler.send_header("content-length", str(length))
        for name, value in (headers or {}).items():
            self.handler.send_header(name, value)
        self.handler.end_headers()
        self.handler.wfile.flush()

    def send(self, rendered: Rendered, status: int = 200, **headers: str) -> None:
        body = rendered.whole
        # HTTP/1.0: a stream is delimited by closing the connection.
        length = None if self.stream else len(body)
        self.head(status, rendered.content_type, length=length, headers=headers)
        self.write(body)

    def render(
        self, text: str = "", calls: Sequence[Call] = (), finish: str = "stop", **kw: Any
    ) -> Rendered:
        make = self.protocol.stream if self.stream else self.protocol.reply
        return make(text, calls, finish, **kw)

    def reset(self) -> None:
        """Close the connection with a TCP reset, without answering."""
        sock = self.handler.connection
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    def pace(
        self,
        rendered: Rendered,
        seconds: float,
        holds: Mapping[int, threading.Event] | None = None,
    ) -> None:
        """Send a stream one SSE event at a time, ``seconds`` apart, as a model writes.

        After the event of index ``n`` (0 is the first), the stream halts until
        ``holds[n]`` is set, so a test sees what a client shows meanwhile. It
        stops when the server closes.
        """
        self.head(200, rendered.content_type)
        events = [event + b"\n\n" for event in rendered.body.split(b"\n\n") if event]
        for index, event in enumerate(events):
            self.write(event)
            hold = (holds or {}).get(index)
            while hold is not None and not hold.wait(0.05):
                if self.stop.is_set():
                    return
            if self.stop.wait(seconds):
                return
        self.write(rendered.end)

    def drip(self, data: bytes) -> None:
        """Send ``data`` one byte every DRIP_SECONDS until it ends or the test does."""
        for byte in data:
            if self.stop.wait(DRIP_SECONDS):
                return
            self.write(bytes([byte]))


Action = Callable[[Exchange], None]


def ok(exchange: Exchange) -> None:
    exchange.send(exchange.render(OK_TEXT))


@dataclass
class Seen:
    protocol: str
    path: str
    stream: bool
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class FakeProvider:
    """The script and what was asked; ``server`` once started."""

    script: list[Action] = field(default_factory=list)
    fallback: Action = ok
    requests: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: LocalHTTPServer | None = None

    def play(self, actions: Sequence[Action], *, every_time: Action | None = None) -> None:
        with self.lock:
            self.script = list(actions)
            self.fallback = every_time or ok
            self.requests.clear()

    def heal(self) -> None:
        """From now on, answer normally."""
        with self.lock:
            self.script = []
            self.fallback = ok
            self.requests.clear()

    def respond(self, handler: BaseHTTPRequestHandler) -> None:
        protocol = protocol_of(handler.path)
        body = json.loads(handler.body)  # type: ignore[attr-defined]
        stream = bool(body.get("stream")) or ":streamGenerateContent" in handler.path
        with self.lock:
            action = self.script.pop(0) if self.script else self.fallback
            self.requests.append(
                Seen(protocol.name, handler.path, stream, body, dict(handler.headers.items()))
            )
        action(Exchange(handler, protocol, stream, body))

    def start(self) -> LocalHTTPServer:
        self.server = LocalHTTPServer(self.respond)
        return self.server

    def base_urls(self) -> dict[str, str]:
        """Each backend's ``BASE_URL`` on this server."""
        assert self.server is not None
        root = self.server.root
        return {
            "openai": f"{root}/v1",
            "openai_responses": f"{root}/v1",
            "anthropic": root,
            "gemini": f"{root}/v1beta",
            "ollama": root,
        }
