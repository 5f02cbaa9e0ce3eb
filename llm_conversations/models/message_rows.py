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
from llm_conversations.models.feedback import Feedback

__all__ = [
    "chat_messages_of",
    "conversation_history",
    "conversation_messages",
    "message_page",
    "message_position",
]


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
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, [_conversation(alias, conversation_id)])
        rows = cursor.fetchall()
    hidden = frozenset(index for index, row in enumerate(rows) if row[0] is not None)
    return chat_messages_from_checked_rows(row[1:] for row in rows), hidden


_HISTORY_SQL: dict[str, str] = {}


def _history_sql(alias: str) -> str:
    quote = connections[alias].ops.quote_name

    def column(name: str) -> str:
        return _column(alias, Message, name)

    columns = ", ".join(column(name) for name in ("hidden_at", *MESSAGE_COLUMNS))
    sql = _HISTORY_SQL[alias] = (
        f"SELECT {columns} FROM {quote(Message._meta.db_table)}"
        f" WHERE {column('conversation')} = %s ORDER BY {column('position')}"
    )
    return sql


def message_position(conversation_id: uuid.UUID, message_id: uuid.UUID) -> int | None:
    """The position of a message of the conversation; ``None`` for any other id."""
    alias = router.db_for_read(Message)
    sql = _PAGE_SQL.get((alias, "position")) or _position_sql(alias)
    with connections[alias].cursor() as cursor:
        cursor.execute(
            sql, [_uuid_param(alias, "id", message_id), _conversation(alias, conversation_id)]
        )
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def message_page(
    conversation_id: uuid.UUID,
    columns: tuple[str, ...],
    *,
    reader_id: int | None,
    after: uuid.UUID | None,
    ascending: bool,
    limit: int,
) -> list[tuple[Any, ...]]:
    """A page of a conversation's messages: ``columns`` of each as the database
    returns them, then the rating and comment ``reader_id`` gave it (``None``
    twice where none), after the message ``after`` (before it when descending),
    in position order, at most ``limit`` rows, in one query. A page after a
    message of another conversation is empty (:func:`message_position` tells
    the two apart).

    The message list reads every page through here. Its SQL is built once per
    database and shape, as the history's: composing the query, its feedback
    join and its cursor's lookup through the ORM took a quarter of a page.
    """
    alias = router.db_for_read(Message)
    key = (alias, columns, after is not None, ascending)
    sql = _PAGE_SQL.get(key) or _page_sql(*key)
    conversation = _conversation(alias, conversation_id)
    params: list[Any] = [reader_id, conversation]
    if after is not None:
        params += [_uuid_param(alias, "id", after), conversation]
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, [*params, limit])
        rows: list[tuple[Any, ...]] = cursor.fetchall()
    return rows


_PAGE_SQL: dict[Any, str] = {}


def _column(alias: str, model: Any, name: str) -> str:
    # Concrete fields all: their column is set once the model is ready.
    field = cast("Field[Any, Any]", model._meta.get_field(name))
    return connections[alias].ops.quote_name(field.column or name)


def _conversation(alias: str, conversation_id: uuid.UUID) -> Any:
    return _uuid_param(alias, "conversation", conversation_id)


def _uuid_param(alias: str, name: str, value: uuid.UUID) -> Any:
    """``value`` as the database takes the message field ``name`` (a UUID or its key)."""
    field = cast("Field[Any, Any]", Message._meta.get_field(name))
    return field.get_db_prep_value(value, connections[alias])


def _position_sql(alias: str) -> str:
    # Aliased: the page's statement holds it as a subquery of the same table.
    quote = connections[alias].ops.quote_name
    cursor = quote("cursor_message")

    def column(name: str) -> str:
        return f"{cursor}.{_column(alias, Message, name)}"

    sql = _PAGE_SQL[alias, "position"] = (
        f"SELECT {column('position')} FROM {quote(Message._meta.db_table)} {cursor}"
        f" WHERE {column('id')} = %s AND {column('conversation')} = %s"
    )
    return sql


def _page_sql(alias: str, columns: tuple[str, ...], after: bool, ascending: bool) -> str:
    quote = connections[alias].ops.quote_name
    message = quote(Message._meta.db_table)
    feedback = quote(Feedback._meta.db_table)

    def of_message(name: str) -> str:
        return f"{message}.{_column(alias, Message, name)}"

    def of_feedback(name: str) -> str:
        return f"{feedback}.{_column(alias, Feedback, name)}"

    selected = ", ".join([*map(of_message, columns), of_feedback("rating"), of_feedback("comment")])
    position = of_message("position")
    sql = (
        f"SELECT {selected} FROM {message} LEFT OUTER JOIN {feedback}"
        f" ON ({of_feedback('message')} = {of_message('id')} AND {of_feedback('user')} = %s)"
        f" WHERE {of_message('conversation')} = %s"
    )
    if after:
        sql += f" AND {position} {'>' if ascending else '<'} ({_position_sql(alias)})"
    sql += f" ORDER BY {position} {'ASC' if ascending else 'DESC'} LIMIT %s"
    _PAGE_SQL[alias, columns, after, ascending] = sql
    return sql


def _fetch(alias: str, sql: str, params: Any) -> list[ChatMessage]:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return chat_messages_from_checked_rows(rows)
