"""A Tasks backend on Celery: the app's tasks run in ``celery worker`` processes.

:class:`CeleryBackend` sends every Tasks task as one generic Celery task,
:func:`execute_task`, carrying the task's module path and its arguments (ids as
text); the worker imports the Tasks task and calls it. ``run_after`` becomes
Celery's ``eta``. Nothing is read back from Celery's result backend: a run's
row is its truth, so ``supports_get_result`` is False.

A Celery message may be delivered twice (``acks_late`` redelivers a message
whose worker was lost); a run refuses a second execution by its own
conditional claim, and a run whose worker died is requeued by the reaper once
its lease expires, whatever Celery does with the message.

Celery threads get no ``request_finished``: :func:`close_connections` closes a
task's Django connections after it (``task_postrun``), and stale ones before
it (``task_prerun``). Install the ``celery`` extra; see docs/deployment.md.
"""

from __future__ import annotations

from typing import Any

from celery import Celery, shared_task, signals
from django.db import close_old_connections, connections
from django.utils.module_loading import import_string

try:
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskResult, TaskResultStatus
    from django.tasks.signals import task_enqueued
except ImportError:  # Django 5.2: the backport
    from django_tasks.backends.base import BaseTaskBackend  # type: ignore[assignment]
    from django_tasks.base import (  # type: ignore[assignment]
        Task,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.signals import task_enqueued
from django.utils.crypto import get_random_string

__all__ = ["CeleryBackend", "close_connections", "configure", "execute_task"]

TASK_NAME = "llm_conversations.execute_task"


@shared_task(name=TASK_NAME, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def execute_task(module_path: str, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Call the Tasks task at ``module_path`` with ``args`` and ``kwargs``."""
    declared = import_string(module_path)
    if not isinstance(declared, Task):
        raise TypeError(f"{module_path} is not a Tasks task")
    declared.call(*args, **kwargs)


class CeleryBackend(BaseTaskBackend):
    """Queue Tasks tasks as Celery messages; a queue name is a Celery queue."""

    supports_defer = True

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any, Any]:
        """Send ``task`` with its arguments to the Celery broker."""
        self.validate_task(task)
        result_id = get_random_string(32)
        message = (task.module_path, list(args), dict(kwargs))
        if task.run_after is None:
            execute_task.apply_async(args=message, task_id=result_id, queue=task.queue_name)
        else:
            execute_task.apply_async(
                args=message, task_id=result_id, queue=task.queue_name, eta=task.run_after
            )
        result: TaskResult[Any, Any] = TaskResult(
            task=task,
            id=result_id,
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result


def close_connections(**_: Any) -> None:
    """Give a Celery thread's Django connections back after its task (and drop stale
    ones before it): a worker's connections stay bounded by its pool."""
    connections.close_all()


def _close_old(**_: Any) -> None:
    close_old_connections()


def configure(app: Celery) -> Celery:
    """Hook connection hygiene into ``app``'s task signals; returns ``app``.

    ``acks_late`` with ``prefetch_multiplier=1``: a message is acknowledged
    once its task ended, and a worker reserves no more than it executes.
    """
    # dispatch_uid: configuring a second app connects the handlers once.
    signals.task_prerun.connect(_close_old, weak=False, dispatch_uid="llm_conversations.prerun")
    signals.task_postrun.connect(
        close_connections, weak=False, dispatch_uid="llm_conversations.postrun"
    )
    app.conf.worker_prefetch_multiplier = 1
    app.conf.task_acks_late = True
    app.conf.task_reject_on_worker_lost = True
    return app
