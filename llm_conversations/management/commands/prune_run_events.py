"""``manage.py prune_run_events``: delete run events past ``EVENT_RETENTION_DAYS``.

Events of runs still active are kept. Deletes in batches of 1,000 (each its own
short transaction); ``--dry-run`` only counts. Progress goes to stderr.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from llm_conversations.conf import conf
from llm_conversations.conversations.retention import (
    BATCH_SIZE,
    prunable_events,
    prune_events,
    retention_cutoff,
)
from llm_conversations.management.progress import ProgressBar


class Command(BaseCommand):
    help = (
        "Delete run events older than EVENT_RETENTION_DAYS (runs still active keep "
        "theirs), in batches of 1,000."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Count the events that would be deleted; delete nothing.",
        )
        parser.add_argument(
            "--days",
            type=int,
            help="Keep this many days instead of EVENT_RETENTION_DAYS.",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=BATCH_SIZE,
            help=f"Events deleted per transaction (default {BATCH_SIZE}).",
        )

    def handle(
        self,
        *args: Any,
        dry_run: bool = False,
        days: int | None = None,
        batch_size: int = BATCH_SIZE,
        **options: Any,
    ) -> None:
        if days is not None and days < 0:
            raise CommandError("--days cannot be negative.")
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        kept = conf.EVENT_RETENTION_DAYS if days is None else days
        cutoff = retention_cutoff(days=kept)
        total = prunable_events(cutoff).count()
        when = f"older than {kept} day(s) (before {cutoff:%Y-%m-%d %H:%M} UTC)"
        if dry_run:
            self.stdout.write(f"Would delete {total} run event(s) {when}. Nothing was deleted.")
            return
        if not total:
            self.stdout.write(f"Deleted 0 run events: none {when}.")
            return
        bar = ProgressBar(self, total)
        deleted = prune_events(cutoff, batch_size=batch_size, progress=bar)
        bar.close()
        self.stdout.write(self.style.SUCCESS(f"Deleted {deleted} run event(s) {when}."))
