"""``manage.py export_user_data USERNAME``: a user's conversations, for a data request.

Writes the full-fidelity form (the format of ``export_conversations``) of
every conversation the user owns, ratings included; ``--attachments inline``
adds the bytes of their attachments (base64).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from llm_conversations.conversations.transfer.export import (
    Attachments,
    full_records,
    select_conversations,
)
from llm_conversations.management.commands.export_conversations import users, write_output


class Command(BaseCommand):
    help = "Export every conversation a user owns (full-fidelity JSON Lines)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--output", "-o", help="File to write (default: standard output).")
        parser.add_argument(
            "--attachments",
            choices=[a.value for a in Attachments],
            default=Attachments.REFERENCE.value,
            help="Attachments by reference (the default) or inline, bytes included.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        conversations = select_conversations(owners=users([options["username"]]))
        records = full_records(conversations, attachments=Attachments(options["attachments"]))
        written = write_output(self, records, options["output"])
        self.stderr.write(f"Exported {written} conversation(s) of {options['username']}.")
