"""How long conversations, run events and idempotency keys are kept, and deleting them.

A run's events are what a client replays to follow it; once the run has ended
they are history the messages already keep. :func:`prune_events` deletes the
events older than a moment (``EVENT_RETENTION_DAYS`` ago by default), except
those of runs still active (queued, running or waiting for action), in batches
of :data:`BATCH_SIZE`: each batch is one short ``DELETE`` in its own
transaction, so no lock is held for long and writers carry on in between.
``manage.py prune_run_events`` and the ``prune_run_events`` task both call it;
:func:`prune` also deletes idempotency keys older than ``IDEMPOTENCY_KEY_TTL``.

Conversations idle (no new message) for ``CONVERSATION_RETENTION_DAYS`` are
purged by :func:`purge_idle_conversations` (``manage.py purge_conversations`` and
the ``purge_conversations`` task), which then deletes the attachments no
message shows, after ``ORPHAN_ATTACHMENT_HOURS``, files included; conversations
in the trash for ``TRASH_RETENTION_DAYS`` by :func:`purge_trashed_conversations`
(the same command and task); and a user's conversations by
:func:`delete_user_data`. All go through :func:`delete_conversations`, which
applies the store's rule in bulk: a conversation with an active run is never
deleted (see :func:`llm_conversations.conversations.lifecycle.delete_conversation`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from llm_conversations.conf import conf
from llm_conversations.conversations.attachments import purge_orphaned_attachments
from llm_conversations.conversations.idempotency import expired_before
from llm_conversations.exceptions import ConversationBusy
from llm_conversations.models import (
    ACTIVE_RUN_STATUSES,
    ENDED_RUN_STATUSES,
    Attachment,
    Conversation,
    Feedback,
    IdempotencyKey,
    Message,
    Run,
    RunEvent,
)
from llm_conversations.tasks.enqueue import task
from llm_conversations.users import User

__all__ = [
    "BATCH_SIZE",
    "CONVERSATION_BATCH_SIZE",
    "Deleted",
    "Pruned",
    "conversation_cutoff",
    "delete_conversations",
    "delete_user_data",
    "idle_conversations",
    "prunable_events",
    "prune",
    "prune_events",
    "prune_idempotency_keys",
    "prune_run_events",
    "purge_conversations",
    "purge_idle_conversations",
    "purge_trashed_conversations",
    "retention_cutoff",
    "trash_cutoff",
    "trashed_conversations",
    "without_active_run",
]

BATCH_SIZE = 1000
# Conversations deleted per transaction: each takes its messages, runs, events
# and feedback with it, so far fewer than events.
CONVERSATION_BATCH_SIZE = 100

# Runs that ended; the events of every other run are kept whatever their age.
_ENDED = list(ENDED_RUN_STATUSES)


def retention_cutoff(now: datetime | None = None, days: int | None = None) -> datetime:
    """The moment before which events may go: ``days`` (``EVENT_RETENTION_DAYS``) ago."""
    keep = conf.EVENT_RETENTION_DAYS if days is None else days
    return (now or timezone.now()) - timedelta(days=keep)


def prunable_events(older_than: datetime) -> QuerySet[RunEvent]:
    """Events created before ``older_than`` whose run has ended."""
    return RunEvent.objects.filter(created_at__lt=older_than, run__status__in=_ENDED)


def prune_events(
    older_than: datetime | None = None,
    *,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Delete :func:`prunable_events` in batches; returns how many were deleted.

    ``older_than`` defaults to :func:`retention_cutoff`. ``progress`` is called
    after each batch with the number deleted so far. The run's status is checked
    again by each ``DELETE``, so a run retried meanwhile keeps its events.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    cutoff = retention_cutoff() if older_than is None else older_than
    deleted = 0
    while True:
        batch = prunable_events(cutoff).order_by("id").values("id")[:batch_size]
        with transaction.atomic():
            count, _ = prunable_events(cutoff).filter(id__in=batch).delete()
        deleted += count
        if count and progress is not None:
            progress(deleted)
        if count < batch_size:
            return deleted


def prune_idempotency_keys(now: datetime | None = None) -> int:
    """Delete idempotency keys older than ``IDEMPOTENCY_KEY_TTL`` seconds."""
    return IdempotencyKey.objects.filter(created_at__lt=expired_before(now)).delete()[0]


@dataclass(frozen=True)
class Pruned:
    """How many rows of each kind were deleted."""

    events: int
    idempotency_keys: int


def prune(now: datetime | None = None) -> Pruned:
    """Delete the events and the idempotency keys whose time has passed (as of ``now``)."""
    return Pruned(
        events=prune_events(retention_cutoff(now)), idempotency_keys=prune_idempotency_keys(now)
    )


# Conversations ------------------------------------------------------------------


@dataclass(frozen=True)
class Deleted:
    """How many conversations (and messages with them) were deleted, and how many
    orphaned attachments (:func:`purge_idle_conversations` only)."""

    conversations: int
    messages: int
    attachments: int = 0


def conversation_cutoff(now: datetime | None = None, days: int | None = None) -> datetime | None:
    """The moment before which an idle conversation may go: ``days``
    (``CONVERSATION_RETENTION_DAYS``) ago, or ``None`` when conversations are kept forever."""
    keep = conf.CONVERSATION_RETENTION_DAYS if days is None else days
    if keep is None:
        return None
    return (now or timezone.now()) - timedelta(days=keep)


def trash_cutoff(now: datetime | None = None, days: int | None = None) -> datetime | None:
    """The moment before which a trashed conversation may go: ``days``
    (``TRASH_RETENTION_DAYS``) ago, or ``None`` when the trash is kept."""
    keep = conf.TRASH_RETENTION_DAYS if days is None else days
    if keep is None:
        return None
    return (now or timezone.now()) - timedelta(days=keep)


def without_active_run(conversations: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """``conversations`` less those with an active run: the store's delete rule, in bulk."""
    active = Run.objects.filter(conversation_id=OuterRef("pk"), status__in=ACTIVE_RUN_STATUSES)
    return conversations.exclude(Exists(active))


def idle_conversations(older_than: datetime) -> QuerySet[Conversation]:
    """Conversations without a new message since before ``older_than`` and no active run."""
    return without_active_run(Conversation.objects.filter(updated_at__lt=older_than))


def trashed_conversations(older_than: datetime) -> QuerySet[Conversation]:
    """Conversations trashed before ``older_than`` (a trashed one has no active run:
    :func:`~llm_conversations.conversations.lifecycle.trash_conversation` refuses it)."""
    return without_active_run(Conversation.objects.filter(trashed_at__lt=older_than))


def delete_conversations(
    candidates: QuerySet[Conversation],
    *,
    batch_size: int = CONVERSATION_BATCH_SIZE,
    progress: Callable[[int], None] | None = None,
) -> Deleted:
    """Delete ``candidates`` (with messages, runs, events, feedback) in batches.

    ``candidates`` must already leave out conversations with an active run
    (:func:`without_active_run`). Each batch is one short transaction: it locks
    up to ``batch_size`` of the rows (skipping rows another transaction holds,
    such as an append), then deletes those still matching ``candidates``, read
    again after the locks are held, so a conversation that a run started on or
    a message reached meanwhile stays. A run starting later waits for the lock
    and then finds the conversation gone. ``progress`` is called after each
    batch with the number of conversations deleted so far.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    conversations = messages = 0
    while True:
        with transaction.atomic():
            ids = list(
                candidates.order_by("pk")
                .select_for_update(skip_locked=True)
                .values_list("pk", flat=True)[:batch_size]
            )
            if not ids:
                break
            _, counts = candidates.filter(pk__in=ids).delete()
        conversations += counts.get(Conversation._meta.label, 0)
        messages += counts.get(Message._meta.label, 0)
        if progress is not None:
            progress(conversations)
        if len(ids) < batch_size:
            break
    return Deleted(conversations=conversations, messages=messages)


def purge_idle_conversations(
    older_than: datetime | None = None,
    *,
    batch_size: int = CONVERSATION_BATCH_SIZE,
    progress: Callable[[int], None] | None = None,
) -> Deleted:
    """Delete the conversations idle since before ``older_than`` (default
    :func:`conversation_cutoff`; none when conversations are kept forever), then
    the attachments no message shows any more, uploaded more than
    ``ORPHAN_ATTACHMENT_HOURS`` ago, with their files."""
    cutoff = conversation_cutoff() if older_than is None else older_than
    deleted = Deleted(conversations=0, messages=0)
    if cutoff is not None:
        deleted = delete_conversations(
            idle_conversations(cutoff), batch_size=batch_size, progress=progress
        )
    return replace(deleted, attachments=purge_orphaned_attachments())


def purge_trashed_conversations(
    older_than: datetime | None = None,
    *,
    batch_size: int = CONVERSATION_BATCH_SIZE,
    progress: Callable[[int], None] | None = None,
) -> Deleted:
    """Delete the conversations trashed before ``older_than`` (default
    :func:`trash_cutoff`; none while ``TRASH_RETENTION_DAYS`` is ``None``). One
    restored while the purge runs is read again under its lock, and stays."""
    cutoff = trash_cutoff() if older_than is None else older_than
    if cutoff is None:
        return Deleted(conversations=0, messages=0)
    return delete_conversations(
        trashed_conversations(cutoff), batch_size=batch_size, progress=progress
    )


@dataclass(frozen=True)
class UserDataDeleted:
    """What :func:`delete_user_data` deleted."""

    conversations: int
    messages: int
    feedback: int
    attachments: int = 0


def delete_user_data(user: User, *, batch_size: int = CONVERSATION_BATCH_SIZE) -> UserDataDeleted:
    """Delete every conversation ``user`` owns, every rating they gave and every
    attachment they uploaded (files included).

    Raises :class:`~llm_conversations.exceptions.ConversationBusy` and deletes
    nothing while one of their conversations has an active run. A run started
    while the deletion proceeds keeps its conversation: the caller sees it by
    ``Conversation.objects.filter(owner=user).exists()``. The user account
    itself belongs to the site and stays.
    """
    owned = Conversation.objects.filter(owner=user)
    if Run.objects.filter(conversation__owner=user, status__in=ACTIVE_RUN_STATUSES).exists():
        raise ConversationBusy(
            "a conversation of this user has an active run; wait for it or cancel it."
        )
    # Their ratings in their own conversations go with those conversations.
    given = Feedback.objects.filter(user=user).count()
    deleted = delete_conversations(without_active_run(owned), batch_size=batch_size)
    with transaction.atomic():
        Feedback.objects.filter(user=user).delete()
        # Only their own conversations could show them, and those are gone;
        # the files go when this commits.
        attachments, _ = Attachment.objects.filter(owner=user).delete()
    return UserDataDeleted(
        conversations=deleted.conversations,
        messages=deleted.messages,
        feedback=given,
        attachments=attachments,
    )


@task()
def prune_run_events() -> dict[str, int]:
    """Delete run events older than ``EVENT_RETENTION_DAYS`` and expired idempotency
    keys (schedule it daily or so): :func:`prune`."""
    pruned = prune()
    return {"deleted": pruned.events, "idempotency_keys": pruned.idempotency_keys}


@task()
def purge_conversations() -> dict[str, int]:
    """Delete the conversations in the trash for longer than ``TRASH_RETENTION_DAYS``
    (:func:`purge_trashed_conversations`), then those idle for longer than
    ``CONVERSATION_RETENTION_DAYS``, in batches, never one with an active run; none
    while a setting is ``None``; then the orphaned attachments
    (``ORPHAN_ATTACHMENT_HOURS``). Schedule it daily: :func:`purge_idle_conversations`."""
    trashed = purge_trashed_conversations()
    deleted = purge_idle_conversations()
    return {
        "conversations": deleted.conversations + trashed.conversations,
        "messages": deleted.messages + trashed.messages,
        "attachments": deleted.attachments,
        "trashed": trashed.conversations,
    }
