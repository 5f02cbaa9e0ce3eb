"""A small threaded HTTP server on 127.0.0.1 for tests that need a real socket.

Deadlines, dripping bodies, hung and reset connections cannot be faked with
httpx's MockTransport: these tests serve a ``respond(handler)`` function on an
ephemeral port, in a thread, and always shut it down.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LocalHTTPServer", "Respond", "serving", "stop_event"]

Respond = Callable[[BaseHTTPRequestHandler], None]


class LocalHTTPServer(ThreadingHTTPServer):
    """Serves POST (and GET) requests with ``respond``; each handler has the request ``body`` read.

    ``stop`` is set when the server closes, so a handler that drips or hangs
    stops waiting (wait on it rather than sleeping).
    """

    daemon_threads = True

    def __init__(self, respond: Respond) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"
            body = b""

            def do_POST(self) -> None:
                self.body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with contextlib.suppress(OSError, ValueError):  # the client hung up
                    respond(self)

            # A GET has no body; tests that must see any request at all serve it too.
            do_GET = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.stop = threading.Event()
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def root(self) -> str:
        """``http://127.0.0.1:{port}``, no trailing slash."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A handler that closed its own socket (a reset) ends with an error; expected.
        pass

    def close(self) -> None:
        self.stop.set()
        self.shutdown()
        self.server_close()


def stop_event(handler: BaseHTTPRequestHandler) -> threading.Event:
    """Set when the server closes, so a handler stops sending."""
    server = handler.server
    assert isinstance(server, LocalHTTPServer)
    return server.stop


@contextlib.contextmanager
def serving(respond: Respond) -> Iterator[LocalHTTPServer]:
    """Serve ``respond`` on an ephemeral port for the ``with`` block."""
    server = LocalHTTPServer(respond)
    try:
        yield server
    finally:
        server.close()
