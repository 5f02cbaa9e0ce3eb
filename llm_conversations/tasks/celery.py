"""A Tasks backend on Celery: the app's tasks run in ``celery worker`` processes.

:class:`CeleryBackend` sends every Tasks task as one generic Celery task,
:func:`execute_task`, carrying the task's module path and its arguments (ids as
text); the worker imports the Tasks task and calls it. ``run_after`` becomes
Celery's ``eta``. It sends with the project's Celery app, the one given to
:func:`configure`, never Celery's "current" app: that one is per thread, and in
a web server's request threads it is Celery's unconfigured fallback (a broker
at ``amqp://localhost``), where a run would stay queued. A project that never
loaded its Celery app is told so (check ``llm_conversations.E092``, and
:class:`~django.core.exceptions.ImproperlyConfigured` on enqueue). Nothing is
read back from Celery's result backend: a run's row is its truth, so
``supports_get_result`` is False.

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
from django.core.exceptions import ImproperlyConfigured
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

__all__ = ["CeleryBackend", "close_connections", "configure", "configured_app", "execute_task"]

TASK_NAME = "llm_conversations.execute_task"
NO_APP = (
    "no Celery app was configured: call llm_conversations.tasks.celery.configure() on "
    "the project's Celery app and import that module from the project package's "
    "__init__.py, as Celery's Django guide does (docs/deployment.md)."
)

# The app configure() was given: the one every enqueue sends with.
_configured: Celery | None = None


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
        """Send ``task`` with its arguments to the broker of the configured Celery app."""
        self.validate_task(task)
        if _configured is None:
            raise ImproperlyConfigured(NO_APP)
        result_id = get_random_string(32)
        message = (task.module_path, list(args), dict(kwargs))
        _configured.send_task(
            TASK_NAME, args=message, task_id=result_id, queue=task.queue_name, eta=task.run_after
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


def configured_app() -> Celery | None:
    """The Celery app given to :func:`configure`, which :class:`CeleryBackend` sends with."""
    return _configured


def close_connections(**_: Any) -> None:
    """Give a Celery thread's Django connections back after its task (and drop stale
    ones before it): a worker's connections stay bounded by its pool."""
    connections.close_all()


def _close_old(**_: Any) -> None:
    close_old_connections()


def configure(app: Celery) -> Celery:
    """Make ``app`` the one :class:`CeleryBackend` sends with, and hook connection
    hygiene into its task signals; returns ``app``.

    ``acks_late`` with ``prefetch_multiplier=1``: a message is acknowledged
    once its task ended, and a worker reserves no more than it executes.
    """
    global _configured
    _configured = app
    # dispatch_uid: configuring a second app connects the handlers once.
    signals.task_prerun.connect(_close_old, weak=False, dispatch_uid="llm_conversations.prerun")
    signals.task_postrun.connect(
        close_connections, weak=False, dispatch_uid="llm_conversations.postrun"
    )
    app.conf.worker_prefetch_multiplier = 1
    app.conf.task_acks_late = True
    app.conf.task_reject_on_worker_lost = True
    return app
