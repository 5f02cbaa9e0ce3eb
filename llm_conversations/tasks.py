"""Tasks of Django's Tasks framework: executing runs in the background, reaping
lost ones, pruning old run events, purging idle conversations, writing
automatic titles.

``django.tasks`` on Django 6.x, the ``django-tasks`` backport on 5.2. The tasks
use the backend named by ``LLM_CONVERSATIONS["TASK_BACKEND"]`` (an alias of the
project's ``TASKS`` setting): the database backend (``django-tasks-db``, worker
``manage.py db_worker``) by default, or a broker-backed one (``django-tasks-rq``).
Arguments are run or conversation ids as text, so any backend can serialise them.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.utils import timezone

from llm_conversations.conf import conf

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task  # type: ignore[no-redef]

__all__ = [
    "enqueue_run",
    "enqueue_title",
    "execute_run",
    "generate_title",
    "prune_run_events",
    "purge_conversations",
    "reap_lost_runs",
]


@task()
def execute_run(run_id: str) -> str:
    """Execute a queued run until it ends or waits; returns its status."""
    from llm_conversations.services import ToolLoopService

    return str(ToolLoopService().execute(run_id).status)


@task()
def reap_lost_runs() -> dict[str, int]:
    """Requeue or fail runs whose worker died (schedule it every minute or so)."""
    from llm_conversations.services.leases import reap_runs

    reaped = reap_runs()
    return {
        "requeued": len(reaped.requeued),
        "failed": len(reaped.failed),
        "reenqueued": len(reaped.reenqueued),
    }


@task()
def prune_run_events() -> dict[str, int]:
    """Delete run events older than ``EVENT_RETENTION_DAYS`` and expired idempotency
    keys (schedule it daily or so)."""
    from llm_conversations.services.retention import prune

    pruned = prune()
    return {"deleted": pruned.events, "idempotency_keys": pruned.idempotency_keys}


@task()
def purge_conversations() -> dict[str, int]:
    """Delete conversations idle for longer than ``CONVERSATION_RETENTION_DAYS``, in
    batches, never one with an active run; none while it is ``None``; then the
    orphaned attachments (``ORPHAN_ATTACHMENT_HOURS``). Schedule it daily."""
    from llm_conversations.services.retention import purge_conversations as purge

    deleted = purge()
    return {
        "conversations": deleted.conversations,
        "messages": deleted.messages,
        "attachments": deleted.attachments,
    }


@task()
def generate_title(conversation_id: str) -> str | None:
    """Write a conversation's automatic title; the title, or ``None`` (see
    :func:`llm_conversations.services.titles.generate_title`)."""
    from llm_conversations.services import titles

    return titles.generate_title(conversation_id)


def enqueue_title(conversation_id: uuid.UUID | str) -> Any:
    """Queue ``generate_title`` for a conversation on the configured task backend."""
    return generate_title.using(backend=conf.TASK_BACKEND).enqueue(str(conversation_id))


def enqueue_run(run_id: uuid.UUID | str, *, marked: bool = False) -> Any:
    """Queue ``execute_run`` for a run on the configured task backend.

    The run's ``enqueued_at`` is set first (unless ``marked``: the caller set it
    as it stored the run), so the reaper can tell a run whose task was lost
    from one still waiting its turn (``REQUEUE_SECONDS``).
    """
    from llm_conversations.models import Run, RunStatus

    if not marked:
        Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(enqueued_at=timezone.now())
    return execute_run.using(backend=conf.TASK_BACKEND).enqueue(str(run_id))
