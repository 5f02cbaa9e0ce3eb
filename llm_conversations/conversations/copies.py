"""Copying a conversation's messages inside the database, for forks.

One ``INSERT ... SELECT`` copies any number of rows: no row travels through
Python, and the statement count does not grow with the history. The copies
are checked by the database like any insert (constraints and the triggers of
migration 0002). Only the conversation store calls this; it checks the
conversation-level rules first.
"""

from __future__ import annotations

import uuid
from functools import partial

from django.db import connections, router

from llm_conversations.models import Message, MessageAttachment

__all__ = ["copy_attachment_links", "copy_message_rows"]

# A version 4 UUID made by the database, as each backend stores UUIDField
# ("%%" is "%" in a statement with parameters).
_NEW_UUID = {
    "postgresql": "gen_random_uuid()",
    "sqlite": (
        "lower(hex(randomblob(6)) || '4' || substr(hex(randomblob(2)), 2)"
        " || substr('89ab', 1 + abs(random()) %% 4, 1) || substr(hex(randomblob(2)), 2)"
        " || hex(randomblob(6)))"
    ),
}
# Copied as they are; a copy gets a new id and conversation, and no run
# (runs belong to the source conversation).
_COPIED_COLUMNS = [
    str(field.column)
    for field in Message._meta.concrete_fields
    if field.name not in ("id", "conversation", "run")
]


def copy_message_rows(source_id: uuid.UUID, target_id: uuid.UUID, count: int) -> int:
    """Insert copies of the source's first ``count`` messages into ``target``; how many."""
    using = router.db_for_write(Message)
    connection = connections[using]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(column) for column in _COPIED_COLUMNS)
    conversation_field = Message._meta.get_field("conversation")
    sql = (
        f"INSERT INTO {quote(Message._meta.db_table)} "
        f"({quote('id')}, {quote(conversation_field.column)}, {columns}) "
        f"SELECT {_NEW_UUID[connection.vendor]}, %s, {columns} "
        f"FROM {quote(Message._meta.db_table)} "
        f"WHERE {quote(conversation_field.column)} = %s AND {quote('position')} < %s"
    )
    as_stored = partial(conversation_field.get_db_prep_value, connection=connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [as_stored(target_id), as_stored(source_id), count])
        return int(cursor.rowcount)


def copy_attachment_links(source_id: uuid.UUID, target_id: uuid.UUID, count: int) -> int:
    """Index the attachments the copies show, as the source's rows do; how many links.

    One ``INSERT ... SELECT`` that pairs each copy with its source row by position.
    """
    using = router.db_for_write(MessageAttachment)
    connection = connections[using]
    quote = connection.ops.quote_name
    links = quote(MessageAttachment._meta.db_table)
    messages = quote(Message._meta.db_table)
    conversation = quote(Message._meta.get_field("conversation").column)
    position = quote("position")
    sql = (
        f"INSERT INTO {links} ({quote('message_id')}, {quote('attachment_id')}, {quote('kind')}) "
        f"SELECT dst.{quote('id')}, link.{quote('attachment_id')}, link.{quote('kind')} "
        f"FROM {links} link "
        f"JOIN {messages} src ON src.{quote('id')} = link.{quote('message_id')} "
        f"JOIN {messages} dst ON dst.{conversation} = %s "
        f"AND dst.{position} = src.{position} "
        f"WHERE src.{conversation} = %s AND src.{position} < %s"
    )
    as_stored = partial(
        Message._meta.get_field("conversation").get_db_prep_value, connection=connection
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [as_stored(target_id), as_stored(source_id), count])
        return int(cursor.rowcount)
