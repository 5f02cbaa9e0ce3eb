"""Importing django-ai-assistant's threads into conversations (no extra needed).

django-ai-assistant (0.4) keeps a ``Thread`` (``name``, ``created_by``,
``assistant_id``, times) and its ``Message`` rows, each a LangChain message as
``message_to_dict`` writes it, in its tables ``django_ai_assistant_thread`` and
``django_ai_assistant_message``. :func:`import_threads` reads them from the
project's own database, with the app installed or not, and imports each thread as
a conversation of its creator (the same user model; ``default_owner`` when the
creator is gone), in its own transaction, through the importer
(:class:`~llm_conversations.conversations.transfer.importing.Importer`): the store's rules,
the LangChain format's reading
(:mod:`~llm_conversations.conversations.transfer.import_formats.langchain`), what a thread
left out reported in ``left_out``, a thread refused in ``problems``, and a thread
imported before skipped with ``skip_existing``. The thread's ``assistant_id``
is kept in the conversation's ``metadata["imported_from"]``.

Threads are read in batches by id, a batch's messages in one query: memory holds
one batch, the queries grow with the batches.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection

from llm_conversations.conversations.transfer.import_formats import ForeignFormat
from llm_conversations.conversations.transfer.import_formats.foreign_conversations import (
    ForeignConversation,
    Transcript,
)
from llm_conversations.conversations.transfer.import_formats.langchain import (
    REASONING_PROVIDER,
    read_message,
)
from llm_conversations.conversations.transfer.importing import Imported, Importer
from llm_conversations.exceptions import InvalidImport

__all__ = ["FORMAT", "MESSAGES", "THREADS", "import_threads", "parse_thread"]

THREADS = "django_ai_assistant_thread"
MESSAGES = "django_ai_assistant_message"
BATCH_SIZE = 100


def _moment(value: Any) -> datetime | None:
    """A time column as the database returns it (SQLite: naive UTC or text)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value if isinstance(value, datetime) else None


def parse_thread(record: Mapping[str, Any]) -> ForeignConversation:
    """One thread, as :func:`thread_records` reads it, as a conversation."""
    thread = record["thread"]
    transcript = Transcript(reasoning_provider=REASONING_PROVIDER)
    for index, row in enumerate(record["messages"]):
        value = json.loads(row["message"]) if isinstance(row["message"], str) else row["message"]
        read_message(
            transcript, value, f"messages[{index}]", _moment(row["created_at"]), str(row["id"])
        )
    details = {"assistant_id": thread["assistant_id"]} if thread["assistant_id"] else {}
    return transcript.finish(
        title=thread["name"] or "",
        source_id=str(thread["id"]),
        created_at=_moment(thread["created_at"]),
        updated_at=_moment(thread["updated_at"]),
        details=details,
    )


FORMAT = ForeignFormat(
    "django-ai-assistant", lambda document: [("", document)], lambda _: False, parse_thread
)
"""The format :func:`import_threads` reads its records with."""


def _rows(sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def thread_records(batch_size: int = BATCH_SIZE) -> Iterator[list[dict[str, Any]]]:
    """Batches of threads by id, each ``{"thread": row, "messages": rows}``, messages
    in the order django-ai-assistant reads them (``created_at``, then id)."""
    quote = connection.ops.quote_name
    after: Any = None
    while True:
        where = "" if after is None else f"WHERE {quote('id')} > %s"
        threads = _rows(
            f"SELECT id, name, created_by_id, assistant_id, created_at, updated_at "
            f"FROM {quote(THREADS)} {where} ORDER BY id LIMIT %s",
            [*([] if after is None else [after]), batch_size],
        )
        if not threads:
            return
        marks = ", ".join(["%s"] * len(threads))
        messages: dict[Any, list[dict[str, Any]]] = {thread["id"]: [] for thread in threads}
        for row in _rows(
            f"SELECT id, thread_id, message, created_at FROM {quote(MESSAGES)} "
            f"WHERE thread_id IN ({marks}) ORDER BY thread_id, created_at, id",
            [thread["id"] for thread in threads],
        ):
            messages[row["thread_id"]].append(row)
        yield [{"thread": thread, "messages": messages[thread["id"]]} for thread in threads]
        after = threads[-1]["id"]


def import_threads(importer: Importer, *, batch_size: int = BATCH_SIZE) -> Imported:
    """Import every thread of django-ai-assistant's tables (see the module).

    Raises :class:`InvalidImport` (``unknown_format``) when the database has no such tables.
    """
    if not {THREADS, MESSAGES} <= set(connection.introspection.table_names()):
        raise InvalidImport(
            "unknown_format", f"this database has no {THREADS} and {MESSAGES} tables to import."
        )
    users = get_user_model()._default_manager
    for batch in thread_records(batch_size):
        owners = users.in_bulk({r["thread"]["created_by_id"] for r in batch} - {None})
        for record in batch:
            owner = owners.get(record["thread"]["created_by_id"])
            importer.import_each(f"thread {record['thread']['id']}", record, FORMAT, owner=owner)
    return importer.imported
