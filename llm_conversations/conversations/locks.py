"""The conversation row lock, and who may change a conversation while a run is
active: only that run may append; nobody may delete (``ConversationBusy``).

A conversation in the trash is refused too (``ConversationTrashed``) unless the
caller takes it with ``trashed=True`` (to trash or delete it). The row
lock serialises appenders of one conversation (PostgreSQL); on SQLite the
IMMEDIATE transaction mode does the same. The active run is read by a statement
of its own after the lock is held, so it sees a run committed while the lock was
awaited.
"""

from __future__ import annotations

import uuid

from django.db.models import F, OuterRef, Subquery
from django.utils import timezone

from llm_conversations.conversations.history import ConversationRef, conversation_pk
from llm_conversations.exceptions import ConversationBusy, ConversationTrashed
from llm_conversations.models import ACTIVE_RUN_STATUSES, Conversation, Run

__all__ = [
    "active_run_id",
    "lock_by_counting",
    "lock_conversation",
    "lock_for_change",
    "lock_idle_conversation",
]


def lock_conversation(conversation: ConversationRef, *, trashed: bool = False) -> int:
    """In a transaction: lock the conversation row and return its message count;
    ``ConversationTrashed`` for one in the trash, unless ``trashed``.

    What a start that may find the conversation busy takes before reading
    :func:`active_run_id` (it chooses what to do then), and what queues a
    waiting run; :func:`lock_idle_conversation` refuses a busy one instead.
    """
    count, trashed_at = (
        Conversation.objects.select_for_update()
        .values_list("message_count", "trashed_at")
        .get(pk=conversation_pk(conversation))
    )
    if trashed_at is not None and not trashed:
        raise ConversationTrashed()
    return int(count)


def active_run_id(conversation: ConversationRef) -> uuid.UUID | None:
    """The id of the conversation's active run, ``None`` when it is idle; read under
    :func:`lock_conversation`, it sees a run committed while the lock was awaited."""
    return (
        Run.objects.filter(
            conversation_id=conversation_pk(conversation), status__in=ACTIVE_RUN_STATUSES
        )
        .values_list("pk", flat=True)
        .first()
    )


def lock_idle_conversation(conversation: ConversationRef, *, trashed: bool = False) -> int:
    """In a transaction: lock the conversation row, refusing it while a run is
    active or, unless ``trashed``, while it is in the trash
    (``ConversationTrashed``), and return its message count (for :func:`append_locked`).

    ``ToolLoopService.start`` takes this lock before inserting a run, so
    concurrent starts of one conversation are serialised and every one but
    the first sees the active run (``ConversationBusy``). Raises
    ``Conversation.DoesNotExist`` when the conversation is gone.
    """
    try:
        return lock_for_change(conversation_pk(conversation), None, trashed=trashed)
    except ConversationBusy:
        # The message a refused start has always had.
        raise ConversationBusy() from None


def lock_for_change(conversation_id: uuid.UUID, run: Run | None, *, trashed: bool = False) -> int:
    """Lock the conversation row and return its message count.

    Raises ``ConversationTrashed`` for a conversation in the trash (unless
    ``trashed``), and ``ConversationBusy`` when a run is active, unless ``run``
    is that run.
    The row lock serialises appenders of one conversation (PostgreSQL); on
    SQLite the IMMEDIATE transaction mode does the same. The active run is
    read by a statement of its own, after the lock is held, so it sees a run
    committed while this one waited.
    """
    count = lock_conversation(conversation_id, trashed=trashed)
    active = active_run_id(conversation_id)
    _refuse_busy(active, run)
    return count


def lock_by_counting(conversation_id: uuid.UUID, run: Run | None, adding: int) -> int:
    """Lock the conversation row by counting ``adding`` new messages, and return
    the count before them; the caller inserts them in the same transaction,
    which undoes the count if anything fails.

    What :func:`lock_for_change` and a later count update do, in one statement fewer:
    the ``UPDATE`` takes the row lock, then one read, a statement of its own
    after the lock is held (so it sees a run committed while this one
    waited), returns the count and the active run together.
    Raises ``ConversationTrashed``, ``ConversationBusy`` and
    ``Conversation.DoesNotExist`` as ``lock_for_change``.
    """
    if not Conversation.objects.filter(pk=conversation_id).update(
        message_count=F("message_count") + adding, updated_at=timezone.now()
    ):
        raise Conversation.DoesNotExist("Conversation matching query does not exist.")
    active_run = Run.objects.filter(
        conversation_id=OuterRef("pk"), status__in=ACTIVE_RUN_STATUSES
    ).values("pk")[:1]
    count, active, trashed_at = (
        Conversation.objects.filter(pk=conversation_id)
        .annotate(active=Subquery(active_run))
        .values_list("message_count", "active", "trashed_at")
        .get()
    )
    if trashed_at is not None:
        raise ConversationTrashed()
    _refuse_busy(active, run)
    return int(count) - adding


def _refuse_busy(active: uuid.UUID | None, run: Run | None) -> None:
    if active is not None and (run is None or run.pk != active):
        raise ConversationBusy(
            "another run of this conversation is still active; wait for it or cancel it."
        )
