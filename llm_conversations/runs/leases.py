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
from functools import reduce
from operator import or_

from django.db import DatabaseError, connections, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from llm_conversations.conf import conf
from llm_conversations.core.messages import ChatMessage
from llm_conversations.models import Run, RunEventType, RunStatus
from llm_conversations.runs.live_connections import return_connection
from llm_conversations.runs.log.reader import unstored_text_after
from llm_conversations.runs.log.writer import knows_log, record
from llm_conversations.runs.run_columns import lease_expiry

__all__ = [
    "Heartbeat",
    "History",
    "claim",
    "claim_new",
    "claimed_history",
    "holds",
    "log_claimed",
    "new_owner",
    "release",
]

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
    # A run never started has logged nothing: its log is known from the start.
    fresh = run.started_at is None
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
                Run.objects.filter(pk=run.pk).update(superseded_text=True)
                run.superseded_text = True
            if fresh:
                knows_log(run, 0)
            record(run, [(RunEventType.RUN_RUNNING, data)], state=run)
            # Which worker took which run: the one record of it once the run ends.
            logger.info("Run %s claimed by %s (attempt %d)", run.pk, owner, run.attempts)
    return bool(claimed)


# Marks the Run instance that took its own lease as it was stored (claim_new).
_CLAIMED = "_llm_conversations_claimed"
# The history its start read, kept for its execution (log_claimed).
_HISTORY = "_llm_conversations_history"

# The conversation's messages and the positions of its hidden ones (load_history).
History = tuple[list[ChatMessage], frozenset[int]]


def claim_new(run: Run) -> None:
    """Take a run being stored (not saved yet) as running here, so it is stored
    claimed and logs ``run.running`` in its own transaction (:func:`log_claimed`):
    a run started to be executed at once costs no claim of its own."""
    now = timezone.now()
    run.status, run.lease_owner, run.lease_expires_at = (
        RunStatus.RUNNING,
        new_owner(),
        lease_expiry(),
    )
    run.attempts, run.started_at = 1, now
    setattr(run, _CLAIMED, True)


def log_claimed(run: Run, history: History | None = None) -> None:
    """Log the ``run.running`` of a run :func:`claim_new` took, in the transaction
    that stores it; its log is known from its start. ``history``: the whole
    conversation with the run's user turn and its hidden positions, read under
    that transaction's lock, for the execution (:func:`claimed_history`)."""
    knows_log(run, 0)
    # Handed over: a stream executing the run here subscribes after this commits.
    record(run, [(RunEventType.RUN_RUNNING, {"attempt": 1})], state=run, hand_over=True)
    logger.info("Run %s claimed by %s (attempt 1)", run.pk, run.lease_owner)
    if history is not None:
        setattr(run, _HISTORY, history)


def claimed_history(run: Run) -> History | None:
    """The history :func:`log_claimed` kept on this instance, once: while the run is
    active only it appends, so the execution that starts now need not read it."""
    history: History | None = run.__dict__.pop(_HISTORY, None)
    return history


def holds(run: Run, *, executing: bool = False) -> bool:
    """Whether this instance is a run :func:`claim_new` took here, still to execute;
    ``executing``: its execution starts now (the mark is used up)."""
    held = bool(getattr(run, _CLAIMED, False))
    if held and executing:
        delattr(run, _CLAIMED)
    return held


def release(run: Run) -> None:
    """Give up this process's lease on a run it still holds, so it can be claimed at once."""
    Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, lease_owner=run.lease_owner).update(
        lease_owner="", lease_expires_at=None
    )


class _Looks:
    """The states of the runs this process's heartbeats watch, read in one query,
    and their leases, renewed in one update.

    Every heartbeat looks once a second and renews every third of the lease; a
    worker with hundreds of runs in flight would send hundreds of statements a
    second for it, each waiting for a pooled connection, and on a busy machine
    renewals queued behind each other let live runs' leases lapse. Instead a
    look reuses the states another heartbeat read less than ``FRESH_SECONDS``
    ago, and the heartbeat that finds them stale reads them again for all runs
    at once; a renewal due renews every watched run's lease unless another did
    within half the renewal period. While one reads or renews (it may wait for
    a pooled connection), the others go on with what was done before: no
    heartbeat waits for another.
    """

    FRESH_SECONDS = CHECK_SECONDS / 4

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[uuid.UUID, int] = {}
        self._owners: dict[uuid.UUID, str] = {}
        self._states: dict[uuid.UUID, tuple[str, str]] = {}
        self._read_at = -1.0
        self._reading = False
        self._renewed_at = -1.0
        self._renewing = False

    def watch(self, pk: uuid.UUID, owner: str) -> None:
        with self._lock:
            self._watched[pk] = self._watched.get(pk, 0) + 1
            self._owners[pk] = owner
            self._read_at = -1.0  # read again, with this run

    def unwatch(self, pk: uuid.UUID) -> None:
        with self._lock:
            self._watched[pk] -= 1
            if not self._watched[pk]:
                del self._watched[pk]
                self._owners.pop(pk, None)
                self._states.pop(pk, None)

    def renew(self, every: float) -> None:
        """Renew the lease of every watched run this process holds, in one ``UPDATE``,
        unless that was done less than ``every`` seconds ago or is being done now.

        A run that stopped or changed hands meanwhile is left alone (the update
        matches its status and owner), and the next look sees it lost.
        """
        with self._lock:
            if self._renewing or time.monotonic() - self._renewed_at < every:
                return
            self._renewing = True
            owners = dict(self._owners)
        try:
            held = [Q(pk=pk, lease_owner=owner) for pk, owner in owners.items() if owner]
            if held:
                Run.objects.filter(reduce(or_, held), status=RunStatus.RUNNING).update(
                    lease_expires_at=lease_expiry()
                )
            with self._lock:
                self._renewed_at = time.monotonic()
        finally:
            with self._lock:
                self._renewing = False

    def state(self, pk: uuid.UUID) -> tuple[str, str] | None:
        """The run's status and lease owner, at most ``FRESH_SECONDS`` old; None
        when this thread's connection cannot see the run."""
        with self._lock:
            if self._reading or time.monotonic() - self._read_at < self.FRESH_SECONDS:
                return self._states.get(pk)
            self._reading = True
            watched = list(self._watched)
        try:
            rows = Run.objects.filter(pk__in=watched).values_list("pk", "status", "lease_owner")
            states = {row_pk: (status, owner) for row_pk, status, owner in rows}
        finally:
            with self._lock:
                self._reading = False
        with self._lock:
            self._states = states
            self._read_at = time.monotonic()
            return self._states.get(pk)


_looks = _Looks()


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
        _looks.watch(self._run.pk, self._run.lease_owner)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        return_connection()  # not held while the thread's last look ends
        self._thread.join()
        _looks.unwatch(self._run.pk)

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
        """Whether the run stopped running or changed hands; renews the process's
        leases when ``due`` (a lapse the renewal finds shows at the next look)."""
        state = _looks.state(self._run.pk)
        if state is None:
            return False  # not visible from this connection
        if state != (RunStatus.RUNNING, self._run.lease_owner):
            return True
        if due:
            _looks.renew(conf.LEASE_SECONDS / 6)
        return False
