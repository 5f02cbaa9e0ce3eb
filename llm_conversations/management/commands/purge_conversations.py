"""``manage.py purge_conversations``: delete conversations idle past ``CONVERSATION_RETENTION_DAYS``.

A conversation is idle from its last new message (``updated_at``); one with an
active run is kept. Deletes in batches (each its own short transaction) with
their messages, runs, events and feedback, then the attachments no message
shows (``ORPHAN_ATTACHMENT_HOURS``) with their files; ``--dry-run`` only
counts. Progress goes to stderr.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from llm_conversations.conf import conf
from llm_conversations.conversations.attachments import purge_orphaned_attachments
from llm_conversations.conversations.retention import (
    CONVERSATION_BATCH_SIZE,
    conversation_cutoff,
    idle_conversations,
    purge_idle_conversations,
)
from llm_conversations.management.progress import ProgressBar
from llm_conversations.models import Message


class Command(BaseCommand):
    help = (
        "Delete conversations idle for longer than CONVERSATION_RETENTION_DAYS (or --days); "
        "conversations with an active run are kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Count the conversations that would be deleted; delete nothing.",
        )
        parser.add_argument(
            "--days",
            type=int,
            help="Delete conversations idle for more than this many days "
            "instead of CONVERSATION_RETENTION_DAYS.",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=CONVERSATION_BATCH_SIZE,
            help=f"Conversations deleted per transaction (default {CONVERSATION_BATCH_SIZE}).",
        )

    def handle(
        self,
        *args: Any,
        dry_run: bool = False,
        days: int | None = None,
        batch_size: int = CONVERSATION_BATCH_SIZE,
        **options: Any,
    ) -> None:
        if days is not None and days < 0:
            raise CommandError("--days cannot be negative.")
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        kept = conf.CONVERSATION_RETENTION_DAYS if days is None else days
        cutoff = conversation_cutoff(days=kept)
        if kept is None or cutoff is None:
            raise CommandError(
                "CONVERSATION_RETENTION_DAYS is None (conversations are kept forever); "
                "pass --days to purge anyway."
            )
        candidates = idle_conversations(cutoff)
        total = candidates.count()
        when = f"idle for more than {kept} day(s) (since before {cutoff:%Y-%m-%d %H:%M} UTC)"
        if dry_run:
            messages = Message.objects.filter(conversation__in=candidates).count()
            self.stdout.write(
                f"Would delete {total} conversation(s) ({messages} message(s)) {when}. "
                "Nothing was deleted."
            )
            return
        if not total:
            self.stdout.write(f"Deleted 0 conversations: none {when}.")
            self._orphans(purge_orphaned_attachments())
            return
        bar = ProgressBar(self, total)
        deleted = purge_idle_conversations(cutoff, batch_size=batch_size, progress=bar)
        bar.close()
        self.stdout.write(
            self.style.SUCCESS(
                f"Deleted {deleted.conversations} conversation(s) "
                f"({deleted.messages} message(s)) {when}."
            )
        )
        self._orphans(deleted.attachments)

    def _orphans(self, count: int) -> None:
        if count:
            self.stdout.write(f"Deleted {count} orphaned attachment(s).")
