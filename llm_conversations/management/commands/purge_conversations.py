"""``manage.py purge_conversations``: delete conversations idle past
``CONVERSATION_RETENTION_DAYS`` and those in the trash past ``TRASH_RETENTION_DAYS``.

A conversation is idle from its last new message (``updated_at``); one with an
active run is kept. Deletes in batches (each its own short transaction) with
their messages, runs, events and feedback, then the attachments no message
shows (``ORPHAN_ATTACHMENT_HOURS``) with their files; ``--dry-run`` only
counts. Progress goes to stderr.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import QuerySet

from llm_conversations.conf import conf
from llm_conversations.conversations.attachments import purge_orphaned_attachments
from llm_conversations.conversations.retention import (
    CONVERSATION_BATCH_SIZE,
    conversation_cutoff,
    delete_conversations,
    idle_conversations,
    trash_cutoff,
    trashed_conversations,
)
from llm_conversations.management.progress import ProgressBar
from llm_conversations.models import Conversation, Message


class Command(BaseCommand):
    help = (
        "Delete conversations idle for longer than CONVERSATION_RETENTION_DAYS (or --days) "
        "and those in the trash for longer than TRASH_RETENTION_DAYS (or --trash-days); "
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
            "--trash-days",
            type=int,
            help="Delete conversations in the trash for more than this many days "
            "instead of TRASH_RETENTION_DAYS.",
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
        trash_days: int | None = None,
        batch_size: int = CONVERSATION_BATCH_SIZE,
        **options: Any,
    ) -> None:
        if (days is not None and days < 0) or (trash_days is not None and trash_days < 0):
            raise CommandError("--days and --trash-days cannot be negative.")
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        kept = conf.CONVERSATION_RETENTION_DAYS if days is None else days
        in_trash = conf.TRASH_RETENTION_DAYS if trash_days is None else trash_days
        if kept is None and in_trash is None:
            raise CommandError(
                "CONVERSATION_RETENTION_DAYS and TRASH_RETENTION_DAYS are None (conversations "
                "are kept forever); pass --days or --trash-days to purge anyway."
            )
        cutoff = conversation_cutoff(days=days)
        if kept is not None and cutoff is not None:
            self._purge(
                idle_conversations(cutoff),
                f"idle for more than {kept} day(s) (since before {cutoff:%Y-%m-%d %H:%M} UTC)",
                dry_run=dry_run,
                batch_size=batch_size,
            )
        trashed = trash_cutoff(days=trash_days)
        if in_trash is not None and trashed is not None:
            self._purge(
                trashed_conversations(trashed),
                f"in the trash for more than {in_trash} day(s)",
                dry_run=dry_run,
                batch_size=batch_size,
            )
        if not dry_run:
            self._orphans(purge_orphaned_attachments())

    def _purge(
        self,
        candidates: QuerySet[Conversation],
        when: str,
        *,
        dry_run: bool,
        batch_size: int,
    ) -> None:
        """Count ``candidates`` (``--dry-run``), or delete them with a progress bar."""
        total = candidates.count()
        if dry_run:
            messages = Message.objects.filter(conversation__in=candidates).count()
            self.stdout.write(
                f"Would delete {total} conversation(s) ({messages} message(s)) {when}. "
                "Nothing was deleted."
            )
            return
        if not total:
            self.stdout.write(f"Deleted 0 conversations: none {when}.")
            return
        bar = ProgressBar(self, total)
        deleted = delete_conversations(candidates, batch_size=batch_size, progress=bar)
        bar.close()
        self.stdout.write(
            self.style.SUCCESS(
                f"Deleted {deleted.conversations} conversation(s) "
                f"({deleted.messages} message(s)) {when}."
            )
        )

    def _orphans(self, count: int) -> None:
        if count:
            self.stdout.write(f"Deleted {count} orphaned attachment(s).")
