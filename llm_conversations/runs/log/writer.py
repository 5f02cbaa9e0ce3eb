"""Writing a run's durable event log.

Every writer holds the run's row lock in the transaction that writes: the state
changes in :mod:`llm_conversations.runs.transitions` lock it already, and live
events (text, calls about to run) take it with a conditional update that also
says whether the run still runs. So the events of one run commit in id order.
Text and reasoning text arrive in many small pieces; :class:`DeltaBuffer`
joins them so the log takes at most one write per ``TEXT_FLUSH_SECONDS`` (or
``TEXT_FLUSH_CHARS`` characters), none of it late.

Once committed, what a transaction logged is pushed to the run's readers
(:mod:`llm_conversations.runs.log.listener`): to this process's in process,
with the stored turns and the run state the writer holds, and on PostgreSQL to
every process's listener through the ``NOTIFY`` sent in the same transaction.
Each batch says which event it follows when the writer knows it (the
execution that holds the run's lease knows its own log since its claim), so a
reader takes it without reading the log.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from django.db import connections, router, transaction
from django.utils import timezone

from llm_conversations.models import Message, Run, RunEvent, RunEventType, RunStatus
from llm_conversations.models.inserts import insert_rows
from llm_conversations.runs.live_connections import on_a_live_connection
from llm_conversations.runs.log.listener import CHANNEL, notifies, notify_payload, publish, wake
from llm_conversations.runs.log.pushes import Pushed

__all__ = [
    "TEXT_FLUSH_CHARS",
    "TEXT_FLUSH_SECONDS",
    "DeltaBuffer",
    "EventItem",
    "handed_batch",
    "knows_log",
    "record",
    "record_live",
]

TEXT_FLUSH_CHARS = 256
TEXT_FLUSH_SECONDS = 0.05

EventItem = tuple[RunEventType, dict[str, Any]]
"""An event to log: its type and data."""

# The id of the run's last event, kept on the Run instance of the execution
# that writes its log (it knows the log from its claim on).
_LOG_TAIL = "_llm_conversations_log_tail"


# The batch a start logged, kept on its run for the stream that executes it.
_HANDED = "_llm_conversations_handed_batch"


def handed_batch(run: Run) -> Pushed | None:
    """The batch :func:`record` kept on this instance (``hand_over``), once: pushed
    when its transaction committed, before a reader that executes the run here
    subscribed, which takes it from here instead of reading the log."""
    batch: Pushed | None = run.__dict__.pop(_HANDED, None)
    return batch


def knows_log(run: Run, last_id: int) -> None:
    """``run`` (an instance) knows its log up to ``last_id``: the next batch it logs
    says so, and readers take it without reading the log."""
    setattr(run, _LOG_TAIL, last_id)


def record(
    run: Run,
    items: Sequence[EventItem],
    *,
    messages: Sequence[Message] = (),
    state: Run | None = None,
    hand_over: bool = False,
) -> list[RunEvent]:
    """Append events; the caller's transaction holds the run's row lock.

    Once committed they are pushed to this process's readers of the run, with
    ``messages`` (the stored turns they name) and ``state`` (the run as it now
    stands) where the caller has them; on PostgreSQL every process's listener
    gets them too, through the ``NOTIFY`` sent here. ``hand_over``: the batch is
    also kept on ``run`` for :func:`handed_batch`.
    """
    rows = insert_rows([RunEvent(run_id=run.pk, type=kind, data=data) for kind, data in items])
    if not rows:
        return rows
    if any(row.id is None for row in rows):
        # A database that does not return inserted ids: readers read the log.
        transaction.on_commit(partial(wake, run.pk))
        return rows
    batch = Pushed(
        str(run.pk),
        getattr(run, _LOG_TAIL, None),
        rows,
        {str(m.pk): m for m in messages},
        None if state is None else copy.copy(state),
    )
    knows_log(run, rows[-1].id)
    if hand_over:
        setattr(run, _HANDED, batch)
    alias = router.db_for_write(RunEvent)
    if notifies(alias):
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, notify_payload(batch)])
    transaction.on_commit(partial(publish, batch))
    return rows


def record_live(run: Run, items: Sequence[EventItem]) -> list[RunEvent] | None:
    """Append events of a running run; ``None`` (nothing written) if it stopped running
    or another process took it over.

    A run cancelled meanwhile writes nothing more after its ``run.cancelled``.
    Live events come after a wait (a model's silence, a tool): a connection the
    database dropped meanwhile is made again and the write done once more.
    """

    def write() -> list[RunEvent] | None:
        with transaction.atomic():
            if not Run.objects.filter(
                pk=run.pk, status=RunStatus.RUNNING, lease_owner=run.lease_owner
            ).update(updated_at=timezone.now()):
                return None
            return record(run, items)

    return on_a_live_connection(write)


class DeltaBuffer:
    """Joins the pieces of a reply being written into the run's delta events:
    ``text.delta``, and ``reasoning.delta`` for reasoning text.

    The rule: the pieces that arrive within ``TEXT_FLUSH_SECONDS`` of the first
    one not written yet are joined (consecutive pieces of one kind into one
    event) and written together then, in one transaction (or sooner, once
    ``TEXT_FLUSH_CHARS`` characters have gathered); what is left when the reply
    ends is written with the stored turn, in its transaction (:meth:`take`). So
    no piece waits longer than ``TEXT_FLUSH_SECONDS`` (the caller writes on
    time, see :meth:`due_in`); a run writes at most about twenty delta
    transactions a second however fast its model streams (each is a
    transaction, and every follower reads it); and a reply that arrives within
    that time costs no transaction of its own.

    Pieces are handed on only once written, so a reader of the log and a live
    stream see the same pieces, and nothing is sent after a cancel.
    """

    def __init__(self, run: Run) -> None:
        self._run = run
        self._pieces: list[tuple[RunEventType, str]] = []
        self._size = 0
        self._since = 0.0
        self.stopped = False

    def add(self, text: str, kind: RunEventType = RunEventType.TEXT_DELTA) -> list[EventItem]:
        """Buffer ``text`` (a piece of ``kind``); the events written, if it was time.

        Sets :attr:`stopped` (and writes nothing) once the run stopped running.
        """
        if not self._pieces:
            self._since = time.monotonic()
        self._pieces.append((kind, text))
        self._size += len(text)
        if self._size >= TEXT_FLUSH_CHARS or self.due_in() == 0:
            return self.flush()
        return []

    def due_in(self) -> float | None:
        """Seconds until what is buffered must be written; ``None`` when nothing is."""
        if not self._pieces:
            return None
        return max(0.0, self._since + TEXT_FLUSH_SECONDS - time.monotonic())

    def flush(self) -> list[EventItem]:
        """Write what is buffered; the events written (none: nothing, or stopped)."""
        if not self._pieces or self.stopped:
            return []
        items = self.take()
        if record_live(self._run, items) is None:
            self.stopped = True
            return []
        return items

    def take(self) -> list[EventItem]:
        """What is buffered, as the events to write (with the stored turn)."""
        items: list[EventItem] = []
        for kind, text in self._pieces:
            if items and items[-1][0] is kind:
                items[-1] = (kind, {"delta": items[-1][1]["delta"] + text})
            else:
                items.append((kind, {"delta": text}))
        self._pieces, self._size = [], 0
        return items
