"""How long run events and idempotency keys are kept, and pruning them.

A run's events are what a client replays to follow it; once the run has ended
they are history the messages already keep. :func:`prune_events` deletes the
events older than a moment (``EVENT_RETENTION_DAYS`` ago by default), except
those of runs still active (queued, running or waiting for action), in batches
of :data:`BATCH_SIZE`: each batch is one short ``DELETE`` in its own
transaction, so no lock is held for long and writers carry on in between.
``manage.py prune_run_events`` and the ``prune_run_events`` task both call it;
:func:`prune` also deletes idempotency keys older than ``IDEMPOTENCY_KEY_TTL``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from llm_conversations.conf import conf
from llm_conversations.models import ACTIVE_RUN_STATUSES, IdempotencyKey, RunEvent, RunStatus
from llm_conversations.services.idempotency import expired_before

__all__ = [
    "BATCH_SIZE",
    "Pruned",
    "prunable_events",
    "prune",
    "prune_events",
    "prune_idempotency_keys",
    "retention_cutoff",
]

BATCH_SIZE = 1000

# Runs that ended; the events of every other run are kept whatever their age.
_ENDED = [status for status in RunStatus if status not in ACTIVE_RUN_STATUSES]


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
