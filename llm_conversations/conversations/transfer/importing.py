"""Importing conversations: our full-fidelity export form, and other tools' formats.

Each conversation is imported in a transaction of its own and only if every
part of it passes the rules a conversation stored here passes: the message and
sequence rules and what the columns hold (``conversations/store.insert_history``
applies ``check_sequence`` and ``storable.check_storable_items``), the attachment checks of
every upload, and for our own form each row's field rules (``clean_fields()``,
``Message.clean()``), the rating rules (``conversations/feedback.check_rating``)
and messages that point to runs of their own conversation.

Our form (:mod:`llm_conversations.conversations.transfer.export` writes it, one
conversation a line, :mod:`~llm_conversations.conversations.transfer.import_records`
reads it) keeps ids, timestamps and counts, so exporting again gives the same
bytes. Other tools' files are read by the parsers of
:mod:`~llm_conversations.conversations.transfer.import_formats` and stored for
``default_owner``.

A file is read a record at a time (:mod:`~llm_conversations.conversations.transfer.import_reading`:
a line, or an item of a top-level array), so memory holds one conversation.
A conversation refused, or a record that is not one (not JSON, not UTF-8, too
deep), is reported (:class:`ImportProblem`: where, code, message, field) and
the import goes on; ``strict`` stops at the first instead.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Field, Model
from django.utils import timezone

from llm_conversations.conversations.store import insert_history, usage_columns
from llm_conversations.conversations.transfer.export import FORMAT
from llm_conversations.conversations.transfer.import_attachments import (
    InlineFile,
    discard_files,
    store_attachments,
)
from llm_conversations.conversations.transfer.import_formats import (
    FOREIGN_FORMATS,
    ForeignFile,
    ForeignFormat,
)
from llm_conversations.conversations.transfer.import_reading import ImportFile, Source
from llm_conversations.conversations.transfer.import_records import Items, RecordReader
from llm_conversations.conversations.transfer.import_shapes import check_storable_value
from llm_conversations.exceptions import InvalidImport, LLMConversationsError
from llm_conversations.models import Conversation, Feedback, Message, Run, TitleSource
from llm_conversations.users import User

__all__ = ["FORMATS", "ImportProblem", "Imported", "Importer"]

# What ``Importer.import_file`` reads: our export form, another tool's, or the
# one the file looks like.
FORMATS = ("ours", *FOREIGN_FORMATS, "auto")
# Ids of conversations read from another tool's file: the same record always
# gets the same id, so importing a file twice is caught (``--skip-existing``).
_FOREIGN_IDS = uuid.UUID("0f5d2a52-6b8e-4f63-9a51-1c7e3b0d9e24")

_TITLE_CHARS = 200  # Conversation.title
_MODEL_CHARS = 200  # Message.model


def _times(row: Any, *names: str) -> dict[str, Any]:
    return {name: getattr(row, name) for name in names}


def _restore_times(model: type[Model], pks: list[Any], times: list[dict[str, Any]]) -> None:
    """Write ``times`` over the times an insert set, one prepared ``UPDATE`` for all rows.

    ``bulk_update`` would too, but builds a ``CASE`` per row and costs more
    than the import itself; ``QuerySet.update`` would take a statement per row.
    """
    if not pks:
        return
    meta = model._meta
    fields = [field for name in times[0] if isinstance(field := meta.get_field(name), Field)]
    pk = meta.pk
    assert pk is not None  # every model has one
    quote = connection.ops.quote_name
    sql = (
        f"UPDATE {quote(meta.db_table)} SET "
        + ", ".join(f"{quote(str(field.column))} = %s" for field in fields)
        + f" WHERE {quote(str(pk.column))} = %s"
    )
    params = [
        [field.get_db_prep_value(values[field.name], connection) for field in fields]
        + [pk.get_db_prep_value(key, connection)]
        for key, values in zip(pks, times, strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


@dataclass(frozen=True, slots=True)
class ImportProblem:
    """A conversation refused (or, among ``Imported.left_out``, a part not stored)."""

    where: str  # "line 5" of a JSON Lines file, "item 3" of a JSON array
    code: str
    message: str
    field: str | None = None

    def __str__(self) -> str:
        at = f" at {self.field}" if self.field else ""
        return f"{self.where}: {self.code}{at}: {self.message}"


@dataclass
class Imported:
    """What an import stored, what it skipped (ids taken, ``skip_existing``) and refused."""

    conversations: int = 0
    messages: int = 0
    runs: int = 0
    attachments: int = 0
    skipped: int = 0
    # Each conversation refused, with why; nothing of it is stored.
    problems: list[ImportProblem] = field(default_factory=list)
    # What imported conversations of other formats left out (images not in
    # the file, calls without a result, ...).
    left_out: list[ImportProblem] = field(default_factory=list)


class Importer:
    """Reads conversations into the database, one conversation per transaction.

    ``default_owner`` owns conversations whose owner's username is not a user
    here (without it they are refused, ``unknown_user``) and every
    conversation of another tool's file. Conversations whose id is taken are
    refused (``conversation_exists``) unless ``skip_existing``. A refused
    conversation is recorded in ``imported.problems`` and the next one read;
    with ``strict`` its error is raised instead (those before it stay).
    ``where`` says what is being read, for error reports (``line 5``).
    """

    def __init__(
        self,
        *,
        default_owner: User | None = None,
        skip_existing: bool = False,
        strict: bool = False,
    ) -> None:
        self.default_owner = default_owner
        self.skip_existing = skip_existing
        self.strict = strict
        self.where = ""
        self.imported = Imported()
        self._reader = RecordReader(default_owner)

    def _each(self, where: str, action: Callable[[], Any]) -> None:
        """Run ``action``; a conversation refused is recorded, or raised when strict."""
        self.where = where
        try:
            action()
        except LLMConversationsError as exc:
            if self.strict:
                raise
            self.imported.problems.append(ImportProblem(where, exc.code, exc.message, exc.field))

    def import_file(self, source: Source, format: str = "ours") -> Imported:
        """Import a file in ``format`` (one of :data:`FORMATS`, our export form by
        default); ``auto`` tells ours by its first record and the others by their shape.

        ``source`` is the file, opened as bytes (UTF-8; a bad byte is reported in
        the record holding it) or text, or its lines. It is read a record at a
        time, a top-level array an item at a time (``conversations/transfer/import_reading.py``).
        """
        if format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}")
        if format == "ours":
            return self.import_lines(source)
        foreign = ForeignFile(None if format == "auto" else FOREIGN_FORMATS[format])
        ours = False
        for record in ImportFile(source, whole_array=foreign.whole_array).records():
            told = foreign.fmt is not None or isinstance(record.value, InvalidImport)
            if ours or (not told and record.document and _is_ours(record.value)):
                ours = True
                self._each(record.where or "line 1", partial(self._import_value, record.value))
                continue
            try:
                items = foreign.conversations(record)
            except InvalidImport as exc:
                if exc.code != "unknown_format":
                    self._each(record.where or "the file", partial(_raise, exc))
                    continue
                # Not a format read here: nothing of the file is.
                if self.strict:
                    raise
                self.imported.problems.append(ImportProblem("the file", exc.code, exc.message))
                return self.imported
            assert foreign.fmt is not None  # told by the record
            for where, item in items:
                self._each(where, partial(self.import_foreign, item, foreign.fmt))
        return self.imported

    def import_lines(self, source: Source) -> Imported:
        """Import each non-blank line of our export form (see the class for errors)."""
        for record in ImportFile(source, lines_only=True).records():
            self._each(record.where, partial(self._import_value, record.value))
        return self.imported

    def _import_value(self, value: Any) -> None:
        if isinstance(value, InvalidImport):
            raise value
        self.import_record(value)

    def import_record(self, record: Any) -> Conversation | None:
        """Import one line of our form; ``None`` when skipped because its id is taken."""
        conversation_id = self._reader.conversation_id(record)
        if Conversation.objects.filter(pk=conversation_id).exists():
            if self.skip_existing:
                self.imported.skipped += 1
                return None
            raise InvalidImport(
                "conversation_exists", f"conversation {conversation_id} exists.", field="id"
            )
        read = self._reader.read(record)
        self._save(
            read.conversation,
            read.items,
            runs=read.runs,
            ratings=read.ratings,
            inline=read.inline,
            times=read.times,
        )
        return read.conversation

    def import_each(
        self, where: str, item: Any, fmt: ForeignFormat, *, owner: User | None = None
    ) -> None:
        """:meth:`import_foreign`, a refusal recorded in ``imported.problems`` at
        ``where`` (raised when ``strict``), as a file's conversations are."""
        self._each(where, partial(self.import_foreign, item, fmt, owner=owner))

    def import_foreign(
        self, item: Any, fmt: ForeignFormat, *, owner: User | None = None
    ) -> Conversation | None:
        """Import one conversation of another tool, read by ``fmt``, for ``owner`` (else
        ``default_owner``); ``None`` when skipped because it was imported before."""
        try:
            read = fmt.parse(item)
        except LLMConversationsError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            # A shape the parser did not foresee: refused, never a crash.
            raise InvalidImport(
                "invalid_import", f"unreadable {fmt.name} record ({exc})."
            ) from None
        source = (
            read.source_id
            or hashlib.sha256(json.dumps(item, sort_keys=True, default=str).encode()).hexdigest()
        )
        conversation_id = uuid.uuid5(_FOREIGN_IDS, f"{fmt.name}:{source}")
        if Conversation.objects.filter(pk=conversation_id).exists():
            if self.skip_existing:
                self.imported.skipped += 1
                return None
            raise InvalidImport(
                "conversation_exists",
                f"this conversation was imported before (as {conversation_id}).",
            )
        title = " ".join(read.title.split())[:_TITLE_CHARS]
        metadata = {"imported_from": {"format": fmt.name, "id": read.source_id, **read.details}}
        check_storable_value({"title": title, "metadata": metadata}, "")
        conversation = Conversation(
            id=conversation_id,
            owner=owner or self.default_owner,
            title=title,
            title_source=TitleSource.AUTO if title else "",
            metadata=metadata,
        )
        now = timezone.now()
        first = read.created_at or next((m.created_at for m in read.messages if m.created_at), now)
        items = [
            (
                foreign.message,
                {
                    "model": foreign.model[:_MODEL_CHARS],
                    "metadata": {"imported_id": foreign.source_id} if foreign.source_id else {},
                    "created_at": foreign.created_at or first,
                    **(usage_columns(foreign.usage) if foreign.usage else {}),
                },
            )
            for foreign in read.messages
        ]
        self._save(conversation, items, times=(first, read.updated_at or first))
        self.imported.left_out += [
            ImportProblem(self.where, note.code, note.message, note.field) for note in read.left_out
        ]
        if not items:
            self.imported.left_out.append(
                ImportProblem(
                    self.where, "empty_conversation", "the record holds no message to import."
                )
            )
        return conversation

    def _save(
        self,
        conversation: Conversation,
        items: Items,
        *,
        runs: Sequence[Run] = (),
        ratings: Sequence[Feedback] = (),
        inline: dict[str, InlineFile] | None = None,
        times: tuple[datetime, datetime],
    ) -> None:
        """Store a conversation read whole, in one transaction: the row, its runs, its
        attachments, its history through the store, its ratings, then the times read."""
        # Inserts set created_at and updated_at to now (auto_now); the times
        # read are written back after them.
        run_times = [_times(run, "created_at", "updated_at") for run in runs]
        rating_times = [_times(rating, "created_at", "updated_at") for rating in ratings]
        created: list[Any] = []
        try:
            with transaction.atomic():
                conversation.save(force_insert=True)
                Run.objects.bulk_create(runs)
                _restore_times(Run, [run.pk for run in runs], run_times)
                messages, created = store_attachments(
                    conversation.owner, [message for message, _ in items], inline or {}
                )
                items = [
                    (message, extra) for message, (_, extra) in zip(messages, items, strict=True)
                ]
                rows = insert_history(conversation, items)
                _restore_times(
                    Message,
                    [row.pk for row in rows],
                    [{"created_at": extra["created_at"]} for _, extra in items],
                )
                Feedback.objects.bulk_create(ratings)
                _restore_times(Feedback, [rating.pk for rating in ratings], rating_times)
                # Last, after the store set updated_at to now.
                Conversation.objects.filter(pk=conversation.pk).update(
                    created_at=times[0], updated_at=times[1]
                )
        except IntegrityError:
            discard_files(created)
            raise InvalidImport(
                "conversation_exists",
                f"a run or message id of conversation {conversation.pk} is taken.",
                field="id",
            ) from None
        except BaseException:
            discard_files(created)
            raise
        self.imported.conversations += 1
        self.imported.messages += len(rows)
        self.imported.runs += len(runs)
        self.imported.attachments += len(created)


def _is_ours(value: Any) -> bool:
    """Whether a file's first record is a line of our export form."""
    return isinstance(value, dict) and value.get("format") == FORMAT


def _raise(error: LLMConversationsError) -> None:
    raise error
