"""Who executes a run: leases and their renewal.

A process claims a run with a conditional update that sets a lease (an owner
and an expiry) and counts the attempt; it renews the lease between steps and,
while a model or a tool works, from a heartbeat thread. Every write the loop
makes is conditional on still holding the lease, so two processes never both
execute one run. Runs whose lease expired are recovered by
:mod:`llm_conversations.runs.reaper`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from django.db import DatabaseError, connections, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from llm_conversations.conf import conf
from llm_conversations.models import Run, RunEventType, RunStatus
from llm_conversations.runs.event_log import record
from llm_conversations.runs.event_reader import unstored_text_after
from llm_conversations.runs.live_connections import return_connection
from llm_conversations.runs.transitions import lease_expiry

__all__ = ["Heartbeat", "claim", "new_owner", "release", "renew"]

logger = logging.getLogger("llm_conversations.leases")

CHECK_SECONDS = 1.0


def new_owner() -> str:
    """A lease owner naming this process (host and pid) and one execution."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def claim(run: Run, owner: str) -> bool:
    """Take the run if it is queued, or running with no lease or an expired one.

    Counts the attempt and logs ``run.running``, with ``superseded_after``
    when a lost attempt's streamed text was left unstored (this attempt answers
    again). False when another process holds it or it is finished or waiting.
    """
    now = timezone.now()
    claimable = (
        Q(status=RunStatus.QUEUED)
        | Q(status=RunStatus.RUNNING, lease_expires_at__isnull=True)
        | Q(status=RunStatus.RUNNING, lease_expires_at__lt=now)
    )
    with transaction.atomic():
        claimed = Run.objects.filter(claimable, pk=run.pk).update(
            status=RunStatus.RUNNING,
            lease_owner=owner,
            lease_expires_at=lease_expiry(),
            attempts=F("attempts") + 1,
            started_at=Coalesce(F("started_at"), now),
        )
        if claimed:
            run.refresh_from_db()
            data: dict[str, int] = {"attempt": run.attempts}
            lost_text_after = unstored_text_after(run.pk) if run.attempts > 1 else None
            if lost_text_after is not None:
                data["superseded_after"] = lost_text_after
            record(run.pk, [(RunEventType.RUN_RUNNING, data)])
            # Which worker took which run: the one record of it once the run ends.
            logger.info("Run %s claimed by %s (attempt %d)", run.pk, owner, run.attempts)
    return bool(claimed)


def renew(run: Run) -> bool:
    """Extend this process's lease; False when the run stopped running or changed hands."""
    return bool(
        Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, lease_owner=run.lease_owner).update(
            lease_expires_at=lease_expiry()
        )
    )


def release(run: Run) -> None:
    """Give up this process's lease on a run it still holds, so it can be claimed at once."""
    Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, lease_owner=run.lease_owner).update(
        lease_owner="", lease_expires_at=None
    )


class Heartbeat:
    """Renews a lease from a thread while a model or a tool works.

    ``lost`` is set when the run stopped running or changed hands, so the loop
    stops at its next step instead of writing what nobody will keep. A run the
    thread's connection cannot see (a test's uncommitted transaction) is left alone.
    """

    def __init__(self, run: Run) -> None:
        self._run = run
        self._stop = threading.Event()
        self.lost = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{run.pk}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        # Look every second, so a cancel from elsewhere stops the run within about
        # a second; renew every third of the lease.
        renew_every = conf.LEASE_SECONDS / 3
        renewed = time.monotonic()
        outage: float | None = None  # when the database went away, while it is away
        try:
            while not self._stop.wait(min(CHECK_SECONDS, renew_every)):
                due = time.monotonic() - renewed >= renew_every
                try:
                    if self._lost(due):
                        self.lost.set()
                        return
                except DatabaseError as exc:
                    # A dropped connection or a restarting server: the lease is not
                    # lost for that. Reconnect at the next look and go on renewing;
                    # one warning per outage, not one per look.
                    if outage is None:
                        outage = time.monotonic()
                        logger.warning(
                            "Renewing the lease of run %s failed (%s); retrying",
                            self._run.pk,
                            type(exc).__name__,
                        )
                    connections.close_all()
                    continue
                if outage is not None:
                    logger.warning(
                        "Renewing the lease of run %s works again after %.1f s",
                        self._run.pk,
                        time.monotonic() - outage,
                    )
                    outage = None
                if due:
                    renewed = time.monotonic()
                return_connection()  # held only while it looks, when pooled
        except Exception:
            logger.exception("Renewing the lease of run %s failed", self._run.pk)
        finally:
            connections.close_all()

    def _lost(self, due: bool) -> bool:
        """Whether the run stopped running or changed hands; renews the lease when ``due``."""
        state = Run.objects.filter(pk=self._run.pk).values_list("status", "lease_owner").first()
        if state is None:
            return False  # not visible from this connection
        if state != (RunStatus.RUNNING, self._run.lease_owner):
            return True
        return due and not renew(self._run)
