"""Writing a run's durable event log.

Every writer holds the run's row lock in the transaction that writes: the state
changes in :mod:`llm_conversations.runs.transitions` lock it already, and live
events (text, calls about to run) take it with a conditional update that also
says whether the run still runs. So the events of one run commit in id order.
Text arrives in many small pieces; :class:`TextBuffer` joins them so the log
holds at most one event per ``TEXT_FLUSH_SECONDS`` (or ``TEXT_FLUSH_CHARS``
characters), none of them late.

Readers waiting in :mod:`llm_conversations.runs.event_reader` wake once the
events are committed: those of this process through
:func:`~llm_conversations.runs.event_listener.wake`, those of every
process on PostgreSQL through the ``NOTIFY`` a trigger sends (migration 0004).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Sequence
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from llm_conversations.models import Run, RunEvent, RunEventType, RunStatus
from llm_conversations.runs.event_listener import wake

__all__ = [
    "TEXT_FLUSH_CHARS",
    "TEXT_FLUSH_SECONDS",
    "EventItem",
    "TextBuffer",
    "record",
    "record_live",
]

TEXT_FLUSH_CHARS = 256
TEXT_FLUSH_SECONDS = 0.05

EventItem = tuple[RunEventType, dict[str, Any]]
"""An event to log: its type and data."""


def record(run_id: uuid.UUID, items: Sequence[EventItem]) -> list[RunEvent]:
    """Append events; the caller's transaction holds the run's row lock.

    Once committed, this process's readers of the run are woken; on
    PostgreSQL a trigger also notifies every process's listener.
    """
    rows = RunEvent.objects.bulk_create(
        [RunEvent(run_id=run_id, type=kind, data=data) for kind, data in items]
    )
    if rows:
        transaction.on_commit(partial(wake, run_id))
    return rows


def record_live(run: Run, items: Sequence[EventItem]) -> list[RunEvent] | None:
    """Append events of a running run; ``None`` (nothing written) if it stopped running
    or another process took it over.

    A run cancelled meanwhile writes nothing more after its ``run.cancelled``.
    """
    with transaction.atomic():
        if not Run.objects.filter(
            pk=run.pk, status=RunStatus.RUNNING, lease_owner=run.lease_owner
        ).update(updated_at=timezone.now()):
            return None
        return record(run.pk, items)


class TextBuffer:
    """Joins text pieces into the run's ``text.delta`` events.

    The rule: a piece that arrives when nothing was written for
    ``TEXT_FLUSH_SECONDS`` is written at once (the reply's first piece, every
    piece of a slow stream); pieces that follow faster are joined and written
    together once ``TEXT_FLUSH_SECONDS`` have passed since the last write, or
    sooner when ``TEXT_FLUSH_CHARS`` characters have gathered. So no piece
    waits longer than ``TEXT_FLUSH_SECONDS`` (the caller writes on time, see
    :meth:`due_in`), and a run writes at most about twenty text events a second
    however fast its model streams: each write is a transaction, and every
    follower reads it.

    Text is handed on only once written, so a reader of the log and a live
    stream see the same pieces, and nothing is sent after a cancel.
    """

    def __init__(self, run: Run) -> None:
        self._run = run
        self._pieces: list[str] = []
        self._size = 0
        self._written_at = -math.inf
        self.stopped = False

    def add(self, text: str) -> str | None:
        """Buffer ``text``; the joined text when it was written, else ``None``.

        Sets :attr:`stopped` (and writes nothing) once the run stopped running.
        """
        self._pieces.append(text)
        self._size += len(text)
        if self._size >= TEXT_FLUSH_CHARS or self.due_in() == 0:
            return self.flush()
        return None

    def due_in(self) -> float | None:
        """Seconds until what is buffered must be written; ``None`` when nothing is."""
        if not self._pieces:
            return None
        return max(0.0, self._written_at + TEXT_FLUSH_SECONDS - time.monotonic())

    def flush(self) -> str | None:
        """Write what is buffered; the text written, or ``None`` (nothing, or stopped)."""
        if not self._pieces or self.stopped:
            return None
        text = "".join(self._pieces)
        self._pieces, self._size = [], 0
        self._written_at = time.monotonic()
        if record_live(self._run, [(RunEventType.TEXT_DELTA, {"delta": text})]) is None:
            self.stopped = True
            return None
        return text
