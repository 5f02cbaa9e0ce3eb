"""``manage.py export_conversations``: conversations as JSON Lines, one per line.

``--format full`` (the default) writes every stored field, which
``import_conversations`` reads back; ``--format finetune`` writes the OpenAI
chat fine-tuning form. Filters: ``--user`` (repeatable), ``--since`` /
``--until`` (creation time) and ``--feedback``. ``--attachments inline``
writes the bytes of each attachment too (base64), so the file imports into an
empty database whole. Streams in constant memory.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import IO, Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from llm_conversations.conversations.transfer.export import (
    CHUNK_SIZE,
    Attachments,
    FeedbackSelection,
    FinetuneExport,
    full_records,
    select_conversations,
    write_lines,
)
from llm_conversations.users import User


def moment(value: str) -> datetime:
    """A date or date and time in ISO 8601; UTC unless it names a zone."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"{value!r} is not an ISO 8601 date or date and time.") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def users(usernames: list[str]) -> list[User]:
    """The users named, or a ``CommandError`` naming one that does not exist."""
    model = get_user_model()
    found = []
    for username in usernames:
        user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"No user is named {username!r}.")
        found.append(user)
    return found


def write_output(
    command: BaseCommand, records: Iterable[dict[str, Any]], output: str | None
) -> int:
    """Write ``records`` as lines of the file ``output``, or of the command's stdout."""
    if output is None or output == "-":
        stream: IO[str] = getattr(command.stdout, "_out", sys.stdout)
        return write_lines(records, stream)
    with open(output, "w", encoding="utf-8", newline="\n") as stream:
        return write_lines(records, stream)


class Command(BaseCommand):
    help = "Export conversations as JSON Lines: the full-fidelity form or the fine-tuning form."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=["full", "finetune"], default="full")
        parser.add_argument("--output", "-o", help="File to write (default: standard output).")
        parser.add_argument(
            "--user", action="append", default=[], help="Only this owner's (repeatable)."
        )
        parser.add_argument("--since", type=moment, help="Created at or after (ISO 8601).")
        parser.add_argument("--until", type=moment, help="Created before (ISO 8601).")
        parser.add_argument(
            "--feedback",
            choices=[f.value for f in FeedbackSelection],
            help="positive: some answer rated +1 and none -1; negative: some rated -1; "
            "any: some rated.",
        )
        parser.add_argument(
            "--attachments",
            choices=[a.value for a in Attachments],
            default=Attachments.REFERENCE.value,
            help="Full form: attachments by reference (the default) or inline, bytes included.",
        )
        parser.add_argument("--chunk-size", type=int, default=CHUNK_SIZE)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["chunk_size"] < 1:
            raise CommandError("--chunk-size must be at least 1.")
        conversations = select_conversations(
            owners=users(options["user"]),
            since=options["since"],
            until=options["until"],
            feedback=FeedbackSelection(options["feedback"]) if options["feedback"] else None,
        )
        finetune = FinetuneExport()
        records = (
            finetune.records(conversations, chunk_size=options["chunk_size"])
            if options["format"] == "finetune"
            else full_records(
                conversations,
                chunk_size=options["chunk_size"],
                attachments=Attachments(options["attachments"]),
            )
        )
        written = write_output(self, records, options["output"])
        skipped = f"; {finetune.skipped} without a final answer or with unoffered tools skipped"
        self.stderr.write(
            f"Exported {written} conversation(s){skipped if finetune.skipped else ''}."
        )
