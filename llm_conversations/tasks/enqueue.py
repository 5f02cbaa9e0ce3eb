"""Django's Tasks framework as this app uses it: the ``task`` decorator and enqueueing.

``django.tasks`` on Django 6.x, the ``django-tasks`` backport on 5.2. Every task
of the app is declared beside the function it runs and is enqueued on the
backend named by ``LLM_CONVERSATIONS["TASK_BACKEND"]`` (an alias of the
project's ``TASKS`` setting): the database backend (``django-tasks-db``, worker
``manage.py db_worker``) by default, or a broker-backed one (``django-tasks-rq``).
Arguments are ids as text, so any backend can serialise them.

On PostgreSQL a task queued in the database also sends ``NOTIFY`` on
:data:`TASK_CHANNEL` (its queue's name as the payload), delivered when the
task's row is committed: ``manage.py llm_worker`` listens and claims it at
once instead of at its next poll.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connections, router

from llm_conversations.conf import conf

try:
    from django.tasks import task, task_backends
except ImportError:  # Django 5.2: the backport
    from django_tasks import task, task_backends  # type: ignore[no-redef,assignment]

__all__ = ["TASK_CHANNEL", "enqueue", "enqueue_later", "task"]

TASK_CHANNEL = "llm_conversations_tasks"
"""Where a task queued in the database is announced on PostgreSQL."""


def enqueue(declared: Any, *args: str) -> Any:
    """Queue the task ``declared`` with ``args`` on the configured backend."""
    result = declared.using(backend=conf.TASK_BACKEND).enqueue(*args)
    _announce(result)
    return result


def enqueue_later(declared: Any, run_after: datetime, *args: str) -> Any:
    """Queue ``declared`` to run from ``run_after``; ``None`` (nothing queued) when the
    configured backend cannot defer a task, so the caller's sweep picks the work up."""
    if not task_backends[conf.TASK_BACKEND].supports_defer:
        return None
    return declared.using(backend=conf.TASK_BACKEND, run_after=run_after).enqueue(*args)


def _announce(result: Any) -> None:
    """``NOTIFY`` listening workers of a task queued in a PostgreSQL database.

    In the transaction of the task's row, if one is open, so a worker is told
    only once the row is there to claim.
    """
    row = getattr(result, "db_result", None)  # django-tasks-db's result carries its row
    if row is None:
        return
    connection = connections[router.db_for_write(type(row))]
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [TASK_CHANNEL, row.queue_name])
