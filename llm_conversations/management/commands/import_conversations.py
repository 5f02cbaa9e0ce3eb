"""``manage.py import_conversations FILE``: our export form, or another tool's file.

``--format`` names what the file is: ``ours`` (the default: what
``export_conversations --format full`` writes), ``openai`` (Chat Completions
message arrays), ``ai-sdk`` (``UIMessage[]``), ``chatgpt`` or ``claude`` (their
data exports' ``conversations.json``), ``langchain`` (``messages_to_dict``
arrays), or ``auto``. ``--from-django-ai-assistant`` reads no file: it imports
django-ai-assistant's threads from this database's tables, each for its creator
(``--default-owner`` for threads whose creator is gone). Each conversation is checked
by the rules of the store and imported in its own transaction; one refused is
reported on stderr with where it is, its error code and field, and the import
goes on (``--strict`` stops at the first instead, those before it staying).
The file is read as bytes, a record at a time (a conversation of a top-level
array at a time), so memory holds one conversation, not the file.
The command fails when it stops (``--strict``) or when conversations were
refused and none imported.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from llm_conversations.conversations.transfer.importing import FORMATS, Importer
from llm_conversations.exceptions import LLMConversationsError
from llm_conversations.frameworks.django_ai_assistant import import_threads
from llm_conversations.management.commands.export_conversations import users


class Command(BaseCommand):
    help = (
        "Import conversations: our export form, another tool's file (--format), "
        "or django-ai-assistant's threads (--from-django-ai-assistant)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", nargs="?", help="The file, or - for standard input.")
        parser.add_argument(
            "--from-django-ai-assistant",
            action="store_true",
            help="Import django-ai-assistant's threads from this database instead of a file.",
        )
        parser.add_argument(
            "--format",
            choices=FORMATS,
            default="ours",
            help="What the file is (default: ours, the export_conversations form).",
        )
        parser.add_argument(
            "--default-owner",
            help="Owner of conversations whose owner's username is not a user here, "
            "and of every conversation of another tool's file.",
        )
        parser.add_argument(
            "--skip-existing",
            action="store_true",
            help="Skip conversations whose id exists (or that were imported before).",
        )
        parser.add_argument(
            "--strict",
            action="store_true",
            help="Stop at the first conversation refused instead of reporting it and going on.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        default = options["default_owner"]
        tables = options["from_django_ai_assistant"]
        if tables == bool(options["path"]):
            raise CommandError("name a file, or --from-django-ai-assistant, but not both.")
        if not tables and options["format"] not in ("ours", "auto") and not default:
            raise CommandError("--default-owner is needed: other tools' files name no owner.")
        importer = Importer(
            default_owner=users([default])[0] if default else None,
            skip_existing=options["skip_existing"],
            strict=options["strict"],
        )
        try:
            if tables:
                imported = import_threads(importer)
            # Read as bytes: a byte that is not UTF-8 is reported in its record.
            elif options["path"] == "-":
                imported = importer.import_file(sys.stdin.buffer, options["format"])
            else:
                with open(options["path"], "rb") as source:
                    imported = importer.import_file(source, options["format"])
        except LLMConversationsError as exc:
            for problem in importer.imported.problems:
                self.stderr.write(str(problem))
            done = importer.imported.conversations
            where = f" at {exc.field}" if exc.field else ""
            raise CommandError(
                f"{importer.where}: {exc.code}{where}: {exc.message} "
                f"({done} conversation(s) imported before it)."
            ) from None
        for problem in imported.problems:
            self.stderr.write(str(problem))
        if options["verbosity"] > 1:
            for note in imported.left_out:
                self.stderr.write(f"left out: {note}")
        summary = (
            f"Imported {imported.conversations} conversation(s) ({imported.messages} "
            f"message(s), {imported.runs} run(s), {imported.attachments} attachment(s)); "
            f"skipped {imported.skipped} existing; refused {len(imported.problems)}."
        )
        if imported.left_out:
            summary += f" {len(imported.left_out)} part(s) left out (-v 2 lists them)."
        if imported.problems and not imported.conversations:
            raise CommandError(summary)
        self.stdout.write(self.style.SUCCESS(summary))
