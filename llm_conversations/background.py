"""Django's Tasks framework as this app uses it: the ``task`` decorator and enqueueing.

``django.tasks`` on Django 6.x, the ``django-tasks`` backport on 5.2. Every task
of the app is declared beside the function it runs and is enqueued on the
backend named by ``LLM_CONVERSATIONS["TASK_BACKEND"]`` (an alias of the
project's ``TASKS`` setting): the database backend (``django-tasks-db``, worker
``manage.py db_worker``) by default, or a broker-backed one (``django-tasks-rq``).
Arguments are ids as text, so any backend can serialise them.
"""

from __future__ import annotations

from typing import Any

from llm_conversations.conf import conf

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task  # type: ignore[no-redef]

__all__ = ["enqueue", "task"]


def enqueue(declared: Any, *args: str) -> Any:
    """Queue the task ``declared`` with ``args`` on the configured backend."""
    return declared.using(backend=conf.TASK_BACKEND).enqueue(*args)
