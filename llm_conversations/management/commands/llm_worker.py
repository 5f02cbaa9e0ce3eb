"""``manage.py llm_worker``: execute database-queued tasks, many runs at once per process.

``db_worker``'s options (it reads the same queue: django-tasks-db's table),
plus ``--concurrency N`` (tasks in flight at once, default 64) and ``--grace
SECONDS`` (how long SIGINT or SIGTERM waits for them). ``--interval`` is the
poll: 5 s on PostgreSQL, where queued tasks are pushed (``LISTEN``/``NOTIFY``)
and polling is only the fallback; 0.1 s elsewhere. See docs/deployment.md.

Without django-tasks-db (the ``tasks-db`` extra, and ``django_tasks_db`` in
``INSTALLED_APPS``) there is no queue to read: the command says what to install
and exits with status 1, instead of failing on an import.
"""

from __future__ import annotations

from typing import NoReturn

from django.apps import apps
from django.core.management.base import BaseCommand

__all__ = ["MISSING", "Command"]

MISSING = (
    "manage.py llm_worker executes the tasks django-tasks-db queues: install "
    'llm-conversations[tasks-db] and add "django_tasks_db" to INSTALLED_APPS.'
)

if apps.is_installed("django_tasks_db"):
    from llm_conversations.management.llm_worker_command import Command
else:

    class Command(BaseCommand):  # type: ignore[no-redef]
        """Says what to install: its models cannot even be imported without it."""

        help = "Execute database-queued tasks (needs django-tasks-db)"

        def run_from_argv(self, argv: list[str]) -> NoReturn:
            # Before parsing: whatever options were given, the answer is the same.
            self.stderr.write(f"CommandError: {MISSING}")
            raise SystemExit(1)
