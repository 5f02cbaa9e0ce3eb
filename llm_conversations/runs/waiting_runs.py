"""Runs waiting behind a conversation's active run (the busy strategy ``enqueue``).

A waiting run holds its user turn's intent (``Run.waiting_turn``), not the turn:
the active run may have calls unanswered, and a user turn stored before they
are answered would break the sequence rules. When the active run ends, in the
transaction that ends it and under the conversation's lock, the oldest waiting
run becomes queued and its user turn is stored (:func:`start_next`), so the
runs of a conversation start one at a time, in the order they were stored, and
none is lost. ``waiting_run_queued`` is sent once that is committed; the
engine's receiver enqueues the run for a task worker.
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
from llm_conversations.models import Run, RunEventType, RunStatus, TerminationReason
from llm_conversations.runs.event_log import record
from llm_conversations.signals import run_finished, waiting_run_queued

__all__ = ["cancel_waiting", "last_in_line", "start_next", "waiting_turn"]


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


def start_next(conversation_id: uuid.UUID) -> Run | None:
    """In the transaction that ended the conversation's active run (so none is active):
    queue the oldest waiting run and store its user turn; ``None`` when none waits.

    A waiting run whose turn can no longer be stored (an attachment it named
    was deleted meanwhile) fails with the reason, and the next one is tried.
    """
    count = lock_conversation(conversation_id)
    waiting = Run.objects.filter(
        conversation_id=conversation_id, status=RunStatus.WAITING
    ).order_by("created_at", "pk")
    while (run := waiting.first()) is not None:
        now = timezone.now()
        turn = run.waiting_turn
        # Conditional: a run cancelled while it waited stays cancelled.
        if not Run.objects.filter(pk=run.pk, status=RunStatus.WAITING).update(
            status=RunStatus.QUEUED, queued_at=now, enqueued_at=now, waiting_turn={}
        ):
            continue
        try:
            with transaction.atomic():
                message = ChatMessage.from_dict(turn["message"])
                append_locked(
                    conversation_id, count, [message], run=run, metadata=turn.get("metadata")
                )
        except InvalidMessage as exc:
            Run.objects.filter(pk=run.pk).update(
                status=RunStatus.FAILED,
                termination_reason=TerminationReason.ERROR,
                error_type=type(exc).__name__,
                error_message=exc.message[:2000],
                finished_at=now,
            )
            record(run.pk, [(RunEventType.RUN_FAILED, {})])
            run.refresh_from_db()
            transaction.on_commit(partial(run_finished.send, sender=Run, run=run))
            continue
        run.refresh_from_db()
        transaction.on_commit(partial(waiting_run_queued.send, sender=Run, run=run))
        return run
    return None


def cancel_waiting(run: Run) -> Run:
    """Cancel a waiting run, locked by the caller's transaction.

    It stored no turn, so nothing else changes but the run behind it, which
    now waits for the one this one waited for.
    """
    Run.objects.filter(waits_for=run, status=RunStatus.WAITING).update(waits_for=run.waits_for_id)
    run.status = RunStatus.CANCELLED
    run.termination_reason = TerminationReason.CANCELLED
    run.finished_at = timezone.now()
    run.waiting_turn = {}
    run.save(
        update_fields=["status", "termination_reason", "finished_at", "waiting_turn", "updated_at"]
    )
    record(run.pk, [(RunEventType.RUN_CANCELLED, {})])
    transaction.on_commit(partial(run_finished.send, sender=Run, run=run))
    return run
