"""Work that must not delay a response: run it once the response has been sent.

:func:`after_response` queues a function while a request is being served and
runs it when Django sends ``request_finished``: a WSGI server sends it when it
closes the response, after the last byte (a streamed one included), and the
ASGI handler after sending the response. Outside a request (a worker, a
management command, a script) the function runs at once.

The scope is a context variable set by ``request_started``, so each request,
thread or ASGI task has its own queue. A failing function is logged by its
exception's type only, since the function logs what it knows; it never
reaches the response or the other functions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from functools import partial
from typing import Any

from django.db import connections

__all__ = ["after_response", "open_scope", "run_queued"]

logger = logging.getLogger("llm_conversations")

_queue: ContextVar[list[Callable[[], Any]] | None] = ContextVar(
    "llm_conversations_after_response", default=None
)


def after_response(func: Callable[..., Any], *args: Any) -> None:
    """Call ``func(*args)`` after the current response is sent, or now outside a request."""
    queued = _queue.get()
    if queued is None:
        _call(partial(func, *args))
    else:
        queued.append(partial(func, *args))


def open_scope(**kwargs: Any) -> None:
    """``request_started`` receiver: the request being served starts an empty queue."""
    _queue.set([])


def run_queued(**kwargs: Any) -> None:
    """``request_finished`` receiver: run what the request queued, in order.

    Django closes the request's database connections before this receiver
    runs (``close_old_connections``); connections the work opened again are
    released the same way afterwards, unless a transaction holds them (a test).
    """
    queued = _queue.get()
    _queue.set(None)
    if not queued:
        return
    for func in queued:
        _call(func)
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


def _call(func: Callable[[], Any]) -> None:
    try:
        func()
    except Exception as exc:
        # The work logs its own details; its exception text may hold data.
        logger.error("Work queued after a response failed (%s)", type(exc).__name__)
