"""Pruning what is kept only for a while: run events and idempotency keys.

A scheduled job (a management command, a periodic task) calls :func:`prune`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from llm_conversations.conf import conf
from llm_conversations.models import ACTIVE_RUN_STATUSES, IdempotencyKey, RunEvent
from llm_conversations.services.idempotency import expired_before

__all__ = ["Pruned", "prune", "prune_events", "prune_idempotency_keys"]


@dataclass(frozen=True)
class Pruned:
    """How many rows of each kind were deleted."""

    events: int
    idempotency_keys: int


def prune_events(now: datetime | None = None) -> int:
    """Delete events older than ``EVENT_RETENTION_DAYS`` of runs that are no longer active."""
    cutoff = (now or timezone.now()) - timedelta(days=conf.EVENT_RETENTION_DAYS)
    old = RunEvent.objects.filter(created_at__lt=cutoff).exclude(
        run__status__in=ACTIVE_RUN_STATUSES
    )
    return old.delete()[0]


def prune_idempotency_keys(now: datetime | None = None) -> int:
    """Delete idempotency keys older than ``IDEMPOTENCY_KEY_TTL`` seconds."""
    return IdempotencyKey.objects.filter(created_at__lt=expired_before(now)).delete()[0]


def prune(now: datetime | None = None) -> Pruned:
    """Delete expired run events and idempotency keys."""
    return Pruned(events=prune_events(now), idempotency_keys=prune_idempotency_keys(now))
