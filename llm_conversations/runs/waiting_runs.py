"""Runs waiting behind a conversation's active run (the busy strategy ``enqueue``).

A waiting run holds its user turn's intent (``Run.waiting_turn``), not the turn:
the active run may have calls unanswered, and a user turn stored before they
are answered would break the sequence rules. When the active run ends, in the
transaction that ends it and under the conversation's lock, the oldest waiting
run becomes queued and its user turn is stored (:func:`queue_oldest`), so the
runs of a conversation start one at a time, in the order they were stored, and
none is lost; one that can no longer start is ended by
:mod:`llm_conversations.runs.transitions`, as every run is.
``waiting_run_queued`` is sent once that is committed; the engine's receiver
enqueues the run for a task worker.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from llm_conversations.conf import conf
from llm_conversations.conversations.locks import lock_conversation
from llm_conversations.conversations.store import append_locked
from llm_conversations.core.messages import ChatMessage, InvalidMessage
from llm_conversations.exceptions import TooManyWaitingRuns
from llm_conversations.models import Run, RunStatus
from llm_conversations.signals import waiting_run_queued

__all__ = ["last_in_line", "queue_oldest", "step_out_of_line", "waiting_turn"]


def waiting_turn(message: ChatMessage, metadata: dict[str, Any] | None) -> dict[str, Any]:
    """What ``Run.waiting_turn`` keeps of a user turn not stored yet."""
    return {"message": message.to_stored(), "metadata": dict(metadata or {})}


def last_in_line(conversation_id: uuid.UUID, active: uuid.UUID) -> uuid.UUID:
    """The run a new waiting run waits behind: the last one waiting, else ``active``;
    ``TooManyWaitingRuns`` when ``MAX_WAITING_RUNS`` wait already.

    Read under the conversation's lock, as every waiting run is stored under it:
    one query, the newest waiting runs up to the limit.
    """
    limit = conf.MAX_WAITING_RUNS
    waiting = list(
        Run.objects.filter(conversation_id=conversation_id, status=RunStatus.WAITING)
        .order_by("-created_at", "-pk")
        .values_list("pk", flat=True)[: limit or 1]
    )
    if limit is not None and len(waiting) >= limit:
        raise TooManyWaitingRuns(limit)
    return waiting[0] if waiting else active


def queue_oldest(
    conversation_id: uuid.UUID, count: int | None = None
) -> tuple[Run, InvalidMessage | None] | None:
    """In the transaction that ended the conversation's active run (so none is active):
    queue the oldest waiting run and store its user turn; ``None`` when none waits.
    ``count``: the conversation's messages, when the transaction holds its row lock
    already (a run that started waiting meanwhile committed before it was taken).

    ``(run, None)`` once queued; ``(run, error)`` when its turn can no longer be
    stored (an attachment it named was deleted meanwhile): it is left waiting,
    for the caller to end.
    """
    if count is None:
        count = lock_conversation(conversation_id)
    waiting = Run.objects.filter(
        conversation_id=conversation_id, status=RunStatus.WAITING
    ).order_by("created_at", "pk")
    # Mostly none waits: that is asked with the narrowest read, the run read after.
    if not waiting.values_list("pk").exists():
        return None
    while (run := waiting.first()) is not None:
        now = timezone.now()
        turn = run.waiting_turn
        try:
            with transaction.atomic():
                # Conditional: a run cancelled while it waited stays cancelled.
                if not Run.objects.filter(pk=run.pk, status=RunStatus.WAITING).update(
                    status=RunStatus.QUEUED, queued_at=now, enqueued_at=now, waiting_turn={}
                ):
                    continue
                message = ChatMessage.from_dict(turn["message"])
                append_locked(
                    conversation_id, count, [message], run=run, metadata=turn.get("metadata")
                )
        except InvalidMessage as exc:
            return run, exc
        run.refresh_from_db()
        transaction.on_commit(partial(waiting_run_queued.send, sender=Run, run=run))
        return run, None
    return None


def step_out_of_line(run: Run) -> None:
    """A waiting run leaves the line (it is cancelled): the run behind it now waits
    for the one this one waited for."""
    Run.objects.filter(waits_for=run, status=RunStatus.WAITING).update(waits_for=run.waits_for_id)
