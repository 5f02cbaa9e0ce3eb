"""``manage.py import_conversations FILE``: read the full-fidelity export form back.

Each conversation is checked by the rules of the store and imported in its own
transaction; the first one refused stops the import (those before it stay)
and is reported with its line and field.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from llm_conversations.conversations.importing import Importer
from llm_conversations.exceptions import LLMConversationsError
from llm_conversations.management.commands.export_conversations import users


class Command(BaseCommand):
    help = "Import conversations written by export_conversations --format full."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="A JSON Lines file, or - for standard input.")
        parser.add_argument(
            "--default-owner",
            help="Owner of conversations whose owner's username is not a user here.",
        )
        parser.add_argument(
            "--skip-existing",
            action="store_true",
            help="Skip conversations whose id exists instead of stopping.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        default = options["default_owner"]
        importer = Importer(
            default_owner=users([default])[0] if default else None,
            skip_existing=options["skip_existing"],
        )
        try:
            if options["path"] == "-":
                imported = importer.import_lines(sys.stdin)
            else:
                with open(options["path"], encoding="utf-8") as lines:
                    imported = importer.import_lines(lines)
        except LLMConversationsError as exc:
            done = importer.imported.conversations
            where = f" at {exc.field}" if exc.field else ""
            raise CommandError(
                f"line {importer.line}: {exc.code}{where}: {exc.message} "
                f"({done} conversation(s) imported before it)."
            ) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {imported.conversations} conversation(s) "
                f"({imported.messages} message(s)); skipped {imported.skipped} existing."
            )
        )
