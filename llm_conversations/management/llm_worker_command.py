"""``manage.py llm_worker`` where django-tasks-db is installed: execute database-queued
tasks, many runs at once per process (``commands/llm_worker.py`` picks this ``Command``).

``db_worker``'s options (it reads the same queue: django-tasks-db's table),
plus ``--concurrency N`` (tasks in flight at once, default 64) and ``--grace
SECONDS`` (how long SIGINT or SIGTERM waits for them). ``--interval`` is the
poll: 5 s on PostgreSQL, where queued tasks are pushed (``LISTEN``/``NOTIFY``)
and polling is only the fallback; 0.1 s elsewhere. See docs/deployment.md.

Unlike ``db_worker`` it does not reload on code changes under ``DEBUG``: a
reload ends the process at once, without ``--grace``, so every run in flight
(dozens at a time) loses its worker and waits for the reaper, and a provider
call it had made may be made again. ``--reload`` asks for it.
"""

from __future__ import annotations

import logging
import os
from argparse import ArgumentParser, ArgumentTypeError
from typing import Any

from django.core.management.base import CommandError
from django.db import connections, router
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV, run_with_reloader
from django_tasks_db.management.commands import db_worker
from django_tasks_db.models import DBTaskResult

from llm_conversations.runs.log.listener import notifies
from llm_conversations.tasks.worker import ConcurrentWorker

logger = logging.getLogger("django_tasks_db")

PUSHED_INTERVAL = 5.0
POLLED_INTERVAL = 0.1


def positive_int(value: str) -> int:
    """An argument that must be a whole number above zero."""
    number = int(value)
    if number <= 0:
        raise ArgumentTypeError("Must be greater than zero")
    return number


class Command(db_worker.Command):
    help = (
        "Run a database task worker that executes up to --concurrency tasks at once, "
        "picking queued tasks up as they are committed on PostgreSQL"
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            default=64,
            help="Tasks executed at once (default: %(default)r)",
        )
        parser.add_argument(
            "--grace",
            type=db_worker.valid_interval,
            default=30.0,
            help="Seconds SIGINT or SIGTERM waits for the tasks in flight (default: %(default)r)",
        )
        parser.set_defaults(interval=None, reload=False)
        for action in parser._actions:
            if action.dest == "reload":
                action.help = (
                    "Reload the worker on code changes; off by default, even with DEBUG: "
                    "a reload ends the tasks in flight without --grace"
                )

    def handle(  # type: ignore[override]
        self,
        *,
        verbosity: int,
        queue_name: str,
        interval: float | None,
        batch: bool,
        backend_name: str,
        startup_delay: bool,
        reload: bool,
        max_tasks: int | None,
        worker_id: str,
        exclude_queues: str,
        concurrency: int,
        grace: float,
        **options: Any,
    ) -> None:
        self.configure_logging(verbosity)
        queue_names = queue_name.split(",")
        excluded_queue_names = exclude_queues.split(",") if exclude_queues else []
        if excluded_queue_names and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        alias = router.db_for_write(DBTaskResult)
        pushed = notifies(alias)
        if interval is None:
            interval = PUSHED_INTERVAL if pushed else POLLED_INTERVAL
        connection = connections[alias]
        if connection.vendor == "postgresql" and getattr(connection, "pool", None) is None:
            logger.warning(
                "No connection pool configured (DATABASES OPTIONS 'pool'): each task in "
                "flight holds its own connections; see docs/deployment.md"
            )
        worker = ConcurrentWorker(
            concurrency=concurrency,
            grace=grace,
            queue_names=queue_names,
            interval=interval,
            batch=batch,
            backend_name=backend_name,
            startup_delay=startup_delay,
            max_tasks=max_tasks,
            worker_id=worker_id,
            excluded_queue_names=excluded_queue_names,
        )
        if reload and not batch:
            if os.environ.get(DJANGO_AUTORELOAD_ENV) == "true":
                worker.configure_signals()  # only the reloaded child runs tasks
            run_with_reloader(worker.run)
        else:
            worker.configure_signals()
            worker.run()
