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
from collections.abc import Callable
from typing import Any, NamedTuple

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from django.utils import timezone

from llm_conversations.conversations.history import ConversationRef, conversation_pk
from llm_conversations.exceptions import ConversationBusy, ConversationTrashed
from llm_conversations.models import ACTIVE_RUN_STATUSES, Conversation, Run

__all__ = [
    "RunStopped",
    "active_run_id",
    "count_after",
    "count_in",
    "holds_lease",
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

    What :func:`lock_for_change` and a later count update do, in one statement
    fewer (:func:`count_in`). Raises ``ConversationTrashed``, ``ConversationBusy``
    and ``Conversation.DoesNotExist`` as ``lock_for_change``.
    """
    count, active = count_in(conversation_id, adding)
    _refuse_busy(active, run)
    return count


def count_in(conversation_id: uuid.UUID, adding: int) -> tuple[int, uuid.UUID | None]:
    """In a transaction: lock the conversation row by counting ``adding`` new
    messages in, and return the count before them and the active run's id
    (``None`` when it is idle). ``ConversationTrashed`` for one in the trash,
    ``Conversation.DoesNotExist`` when it is gone.

    The ``UPDATE`` takes the row lock; then one read, a statement of its own
    after the lock is held (so it sees a run committed while this one
    waited), returns the count and the active run together.
    """
    connection = connections[router.db_for_write(Conversation)]
    key = _prep(Conversation._meta.pk, conversation_id, connection)
    now = _prep(Conversation._meta.get_field("updated_at"), timezone.now(), connection)
    sql = _statements(connection)
    with connection.cursor() as cursor:
        cursor.execute(sql.count_in, [adding, now, key])
        if not cursor.rowcount:
            raise Conversation.DoesNotExist("Conversation matching query does not exist.")
        cursor.execute(sql.read_count, [key, *ACTIVE_RUN_STATUSES, key])
        count, active, trashed_at = cursor.fetchone()
    if trashed_at is not None:
        raise ConversationTrashed()
    return int(count) - adding, None if active is None else Run._meta.pk.to_python(active)


def count_after(
    conversation_id: uuid.UUID, count: int, adding: int, *, held: Run | None = None
) -> bool:
    """In a transaction: lock the conversation row by counting ``adding`` new
    messages in after its ``count``, if it still has ``count`` messages and, with
    ``held``, that run is its active run under the lease this instance holds
    (none held: any holder's); whether it was so. One conditional ``UPDATE``.
    """
    connection = connections[router.db_for_write(Conversation)]
    params: list[Any] = [
        count + adding,
        _prep(Conversation._meta.get_field("updated_at"), timezone.now(), connection),
        _prep(Conversation._meta.pk, conversation_id, connection),
        count,
    ]
    sql = _statements(connection)
    if held is not None:
        run_key = _prep(Run._meta.pk, held.pk, connection)
        params += [run_key, held.lease_owner, *ACTIVE_RUN_STATUSES]
    with connection.cursor() as cursor:
        cursor.execute(sql.count_after if held is None else sql.count_after_held, params)
        return bool(cursor.rowcount)


def _prep(field: Field[Any, Any], value: Any, connection: BaseDatabaseWrapper) -> Any:
    return field.get_db_prep_value(value, connection=connection)


class _Statements(NamedTuple):
    count_in: str
    read_count: str
    count_after: str
    count_after_held: str


def _statements(connection: BaseDatabaseWrapper) -> _Statements:
    """The counting statements, composed once per kind of database: they run for
    every stored turn, and the ORM would compose each one anew (a subquery alone
    costs it a millisecond)."""
    composed = _COMPOSED.get(connection.vendor)
    if composed is None:
        composed = _COMPOSED[connection.vendor] = _compose(connection.ops.quote_name)
    return composed


_COMPOSED: dict[str, _Statements] = {}


def _compose(quote: Callable[[str], str]) -> _Statements:
    conversations, runs = quote(Conversation._meta.db_table), quote(Run._meta.db_table)
    key, count = quote("id"), quote("message_count")
    updated, trashed = quote("updated_at"), quote("trashed_at")
    run_key, status = quote("id"), quote("status")
    run_conversation = quote(Run._meta.get_field("conversation").column)
    statuses = ", ".join(["%s"] * len(ACTIVE_RUN_STATUSES))
    active = (
        f"SELECT r.{run_key} FROM {runs} r "
        f"WHERE r.{run_conversation} = %s AND r.{status} IN ({statuses})"
    )
    held = (
        f" AND EXISTS (SELECT 1 FROM {runs} r WHERE r.{run_key} = %s "
        f"AND r.{quote('lease_owner')} = %s AND r.{status} IN ({statuses}) "
        f"AND r.{run_conversation} = {conversations}.{key})"
    )
    count_after = (
        f"UPDATE {conversations} SET {count} = %s, {updated} = %s WHERE {key} = %s AND {count} = %s"
    )
    return _Statements(
        count_in=(
            f"UPDATE {conversations} SET {count} = {count} + %s, {updated} = %s WHERE {key} = %s"
        ),
        read_count=(
            f"SELECT {count}, ({active} LIMIT 1), {trashed} FROM {conversations} WHERE {key} = %s"
        ),
        count_after=count_after,
        count_after_held=count_after + held,
    )


def _refuse_busy(active: uuid.UUID | None, run: Run | None) -> None:
    if active is not None and (run is None or run.pk != active):
        raise ConversationBusy(
            "another run of this conversation is still active; wait for it or cancel it."
        )


class RunStopped(Exception):
    """An append of the run's own found it no longer active under its lease."""


def holds_lease(run: Run) -> bool:
    """Whether ``run`` is still active under the lease this instance holds (none
    held: any holder's), which is when its own appends may go on."""
    return Run.objects.filter(
        pk=run.pk, lease_owner=run.lease_owner, status__in=ACTIVE_RUN_STATUSES
    ).exists()
