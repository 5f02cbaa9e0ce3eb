"""The loop's connection across a long wait: given back to its pool before it, and the
writes after it kept when the database dropped the connection meanwhile.

This module imports nothing from the rest of the engine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connection

__all__ = ["on_a_live_connection", "return_connection"]

logger = logging.getLogger("llm_conversations.runs")
_T = TypeVar("_T")


def return_connection() -> None:
    """Give this thread's connection back to its pool before a wait (a provider, a tool).

    A worker holding many runs at once would otherwise hold a connection per run
    (and one per heartbeat) through every wait; pooled, it holds one only while
    it queries, so its connections are bounded by the pool, whatever runs are in
    flight. The next query takes one again. Without a pool nothing changes: a
    fresh connection per wait would cost more than it saves. Inside a
    transaction (a test's, ``ATOMIC_REQUESTS``) the connection must stay.
    """
    if connection.connection is None or connection.in_atomic_block:
        return
    if getattr(connection, "pool", None) is not None:
        connection.close()


def on_a_live_connection(write: Callable[[], _T]) -> _T:
    """``write``, one transaction of the loop, done once more on a new connection
    if the database dropped this one while a provider or a tool worked.

    The loop's connection sits idle through a provider call or a tool; a
    terminated session or a restarted PostgreSQL shows only at its next
    query, and the reply or result in hand would be lost with the run. The
    transaction rolled back whole, so it is safe to do again, and its
    conditional update still refuses a run that changed hands meanwhile.
    Inside an outer transaction (a test's) nothing can be done again.
    """
    try:
        return write()
    except (OperationalError, InterfaceError) as exc:
        if connection.in_atomic_block:
            raise
        logger.warning(
            "The database dropped the loop's connection (%s); reconnecting", type(exc).__name__
        )
        connection.close()
        return write()
