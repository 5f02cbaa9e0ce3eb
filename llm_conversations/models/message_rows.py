"""Message rows read as value objects, at the cost of a plain cursor fetch.

Loading a history is the hot path of every run and every history read. The
ORM's ``values_list()`` passes each value of each row through the field's
converters; here the rows are fetched by a cursor and handed as they come
(every supported backend returns JSON as text, which is why
``JSONField.from_db_value`` decodes it) to
:func:`~llm_conversations.core.stored_rows.chat_messages_from_checked_rows`,
which builds the messages without validating again what the database checked.
"""

from __future__ import annotations

import uuid
from typing import Any, cast

from django.core.exceptions import EmptyResultSet
from django.db import connections, router
from django.db.models import Field, QuerySet

from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.stored_rows import chat_messages_from_checked_rows
from llm_conversations.models.conversations import MESSAGE_COLUMNS, Message

__all__ = ["chat_messages_of", "conversation_history", "conversation_messages"]


def chat_messages_of(queryset: QuerySet[Message]) -> list[ChatMessage]:
    """The messages of ``queryset``'s rows, in its order, in one query.

    Raises :class:`~llm_conversations.core.messages.InvalidMessage` for a row
    that breaks the message rules (stored past the database's checks).
    """
    query = queryset.values_list(*MESSAGE_COLUMNS)
    try:
        sql, params = query.query.get_compiler(using=query.db).as_sql()
    except EmptyResultSet:
        return []
    return _fetch(query.db, sql, params)


def conversation_messages(conversation_id: uuid.UUID) -> list[ChatMessage]:
    """All the messages of a conversation, in order, in one query."""
    return conversation_history(conversation_id)[0]


def conversation_history(conversation_id: uuid.UUID) -> tuple[list[ChatMessage], frozenset[int]]:
    """All the messages of a conversation, in order, and the indexes of those
    hidden from the model, in one query.

    Its SQL is built once per database: compiling the query each time would
    cost a fifth of the fetch of a thousand rows.
    """
    alias = router.db_for_read(Message)
    sql = _HISTORY_SQL.get(alias) or _history_sql(alias)
    field = Message._meta.get_field("conversation")
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, [field.get_db_prep_value(conversation_id, connections[alias])])
        rows = cursor.fetchall()
    hidden = frozenset(index for index, row in enumerate(rows) if row[0] is not None)
    return chat_messages_from_checked_rows(row[1:] for row in rows), hidden


_HISTORY_SQL: dict[str, str] = {}


def _history_sql(alias: str) -> str:
    quote = connections[alias].ops.quote_name
    meta = Message._meta

    def column(name: str) -> str:
        # Concrete fields all: their column is set once the model is ready.
        return quote(cast("Field[Any, Any]", meta.get_field(name)).column or name)

    columns = ", ".join(column(name) for name in ("hidden_at", *MESSAGE_COLUMNS))
    sql = _HISTORY_SQL[alias] = (
        f"SELECT {columns} FROM {quote(meta.db_table)}"
        f" WHERE {column('conversation')} = %s ORDER BY {column('position')}"
    )
    return sql


def _fetch(alias: str, sql: str, params: Any) -> list[ChatMessage]:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return chat_messages_from_checked_rows(rows)
