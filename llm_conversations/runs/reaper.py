"""The reaper: runs whose worker died are requeued, or failed after ``MAX_ATTEMPTS``.

Schedule :func:`reap_lost_runs` every minute or so (or run ``manage.py reap_runs``).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from llm_conversations.conf import conf
from llm_conversations.exceptions import RunStateError
from llm_conversations.models import Run, RunStatus, TerminationReason
from llm_conversations.runs.service import enqueue_run
from llm_conversations.runs.transitions import finish
from llm_conversations.tasks.enqueue import task

__all__ = ["Reaped", "reap_lost_runs", "reap_runs"]

logger = logging.getLogger("llm_conversations.leases")


@dataclass(frozen=True, slots=True)
class Reaped:
    """What one pass of :func:`reap_runs` did: run ids requeued, failed, and
    enqueued again (queued runs whose task may have been lost)."""

    requeued: tuple[uuid.UUID, ...]
    failed: tuple[uuid.UUID, ...]
    reenqueued: tuple[uuid.UUID, ...] = ()


def reap_runs(now: datetime | None = None) -> Reaped:
    """Requeue running runs whose lease expired, or fail them after ``MAX_ATTEMPTS``.

    A failed run's unanswered calls are answered (see ``finish``). Requeued runs
    are enqueued for a worker once the change is committed, and so are runs
    queued too long after their last task (:func:`_reenqueue_stale`).
    """
    moment = now or timezone.now()
    expired = Q(status=RunStatus.RUNNING, lease_expires_at__lt=moment)
    requeued: list[uuid.UUID] = []
    failed: list[uuid.UUID] = []
    for run in Run.objects.filter(expired).only("pk", "attempts", "conversation_id"):
        if run.attempts < conf.MAX_ATTEMPTS:
            with transaction.atomic():
                if Run.objects.filter(expired, pk=run.pk).update(
                    status=RunStatus.QUEUED,
                    lease_owner="",
                    lease_expires_at=None,
                    queued_at=moment,
                ):
                    requeued.append(run.pk)
                    transaction.on_commit(partial(enqueue_run, run.pk))
            continue
        lost = RunStateError(
            "worker_lost",
            f"the worker executing the run stopped answering {run.attempts} times.",
        )
        ended = finish(run, RunStatus.FAILED, TerminationReason.WORKER_LOST, lost, where=expired)
        if ended.status == RunStatus.FAILED:
            failed.append(run.pk)
    reenqueued = _reenqueue_stale(moment)
    if requeued or failed or reenqueued:
        logger.warning(
            "Reaped runs: %d requeued, %d failed, %d enqueued again",
            len(requeued),
            len(failed),
            len(reenqueued),
        )
    return Reaped(tuple(requeued), tuple(failed), reenqueued)


def _reenqueue_stale(moment: datetime) -> tuple[uuid.UUID, ...]:
    """Enqueue another task for runs queued ``REQUEUE_SECONDS`` after their last one,
    or after they became queued when they never had one.

    A worker that took a run's task and died before claiming the run leaves it
    queued with no task left; so does a process that stored a run (or recorded
    the approval that queues it again) to execute it in the request, and died
    first. A run merely waiting behind others gets a second
    task that finds it claimed or finished and does nothing; the conditional
    update keeps two reapers from both enqueuing.
    """
    cutoff = moment - timedelta(seconds=conf.REQUEUE_SECONDS)
    # A run with no task at all (it was to run in a request, or a reaper died
    # before its enqueue) counts from when it became queued.
    stale = Q(status=RunStatus.QUEUED) & (
        Q(enqueued_at__lt=cutoff) | Q(enqueued_at__isnull=True, queued_at__lt=cutoff)
    )
    again: list[uuid.UUID] = []
    for pk in Run.objects.filter(stale).values_list("pk", flat=True):
        with transaction.atomic():
            if Run.objects.filter(stale, pk=pk).update(enqueued_at=moment):
                again.append(pk)
                transaction.on_commit(partial(enqueue_run, pk))
    return tuple(again)


@task()
def reap_lost_runs() -> dict[str, int]:
    """Requeue or fail runs whose worker died (schedule it every minute or so)."""
    reaped = reap_runs()
    return {
        "requeued": len(reaped.requeued),
        "failed": len(reaped.failed),
        "reenqueued": len(reaped.reenqueued),
    }
