"""Forks: a new conversation holding copies of another's messages, the rows
copied inside the database. A fork of the same owner takes the first messages
and records its source (:func:`fork_conversation`, and its title,
:func:`fork_title`); a fork for another user takes chosen messages and records
no source (:func:`fork_messages`, a shared snapshot continued).

A fork never ends with tool calls their results do not follow; that is checked
first (for a fork of chosen messages, on the copies before the transaction ends). Then one
``INSERT ... SELECT`` copies any number of rows, numbering them again in their
order: no row travels through Python, and the statement count does not grow
with the history. The copies are checked by the database like any insert
(constraints and the triggers of migration 0002).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connections, router, transaction
from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber

from llm_conversations.conversations.history import cuts_tool_group
from llm_conversations.exceptions import ForkError
from llm_conversations.models import Conversation, Message, MessageAttachment, TitleSource
from llm_conversations.users import User

__all__ = [
    "copy_attachment_links",
    "copy_message_rows",
    "fork_conversation",
    "fork_messages",
    "fork_title",
]

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
# Copied as they are; a copy gets a new id, conversation and position, and no
# run (runs belong to the source conversation).
_COPIED_COLUMNS = [
    str(field.column)
    for field in Message._meta.concrete_fields
    if field.name not in ("id", "conversation", "run", "position")
]


def _ranked(rows: QuerySet[Message], using: str) -> tuple[str, tuple[Any, ...]]:
    """``rows`` as a statement of their ids and their new positions (0, 1, ... in order
    of position), to be read as a table by the copies' statements."""
    ranked = (
        rows.order_by()
        .annotate(rank=Window(RowNumber(), order_by=F("position").asc()) - 1)
        .values("pk", "rank")
    )
    sql, params = ranked.query.get_compiler(using=using).as_sql()
    return sql, tuple(params)


def copy_message_rows(rows: QuerySet[Message], target_id: uuid.UUID) -> int:
    """Insert copies of ``rows`` into ``target``, numbered 0, 1, ... in their order; how many.

    One ``INSERT ... SELECT`` at any length; a fork's rows (the first ones of a
    conversation) keep their positions.
    """
    using = router.db_for_write(Message)
    connection = connections[using]
    quote = connection.ops.quote_name
    columns = ", ".join(f"src.{quote(column)}" for column in _COPIED_COLUMNS)
    conversation_field = Message._meta.get_field("conversation")
    ranked, params = _ranked(rows, using)
    sql = (
        f"INSERT INTO {quote(Message._meta.db_table)} "
        f"({quote('id')}, {quote(conversation_field.column)}, {quote('position')}, "
        f"{', '.join(quote(column) for column in _COPIED_COLUMNS)}) "
        f"SELECT {_NEW_UUID[connection.vendor]}, %s, picked.{quote('rank')}, {columns} "
        f"FROM {quote(Message._meta.db_table)} src "
        f"JOIN ({ranked}) picked ON picked.{quote('pk')} = src.{quote('id')}"
    )
    target = conversation_field.get_db_prep_value(target_id, connection=connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [target, *params])
        return int(cursor.rowcount)


def copy_attachment_links(rows: QuerySet[Message], target_id: uuid.UUID) -> int:
    """Index the attachments the copies of ``rows`` show (:func:`copy_message_rows`),
    as the rows' own links do; how many links.

    One ``INSERT ... SELECT`` that pairs each copy with its source row by its new position.
    """
    using = router.db_for_write(MessageAttachment)
    connection = connections[using]
    quote = connection.ops.quote_name
    links = quote(MessageAttachment._meta.db_table)
    messages = quote(Message._meta.db_table)
    conversation_field = Message._meta.get_field("conversation")
    ranked, params = _ranked(rows, using)
    sql = (
        f"INSERT INTO {links} ({quote('message_id')}, {quote('attachment_id')}, {quote('kind')}) "
        f"SELECT dst.{quote('id')}, link.{quote('attachment_id')}, link.{quote('kind')} "
        f"FROM {links} link "
        f"JOIN ({ranked}) picked ON picked.{quote('pk')} = link.{quote('message_id')} "
        f"JOIN {messages} dst ON dst.{quote(conversation_field.column)} = %s "
        f"AND dst.{quote('position')} = picked.{quote('rank')}"
    )
    target = conversation_field.get_db_prep_value(target_id, connection=connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, target])
        return int(cursor.rowcount)


def fork_conversation(
    source: Conversation, count: int, *, title: str | None = None
) -> Conversation:
    """A new conversation of the same owner holding copies of ``source``'s first
    ``count`` messages, recording where it came from.

    Without ``title`` the fork is named after its source so lists tell them
    apart (:func:`fork_title`: ``Trip (fork)``, then ``Trip (fork 2)``, ...),
    keeping who set it; an untitled source gives an untitled fork, which an
    automatic title fills after its first run. A ``title`` given is the user's.

    ``source`` is only read, never locked or changed, so a source with an
    active run can be forked: only turns already stored are copied. Copies
    keep their text, usage and metadata but not their run. Raises
    ``ForkError`` ``inside_tool_group`` when the copy would end with tool
    calls its results do not follow, and ``Conversation.DoesNotExist`` when
    ``source`` is deleted meanwhile. Costs the same statements at any length.
    """
    if cuts_tool_group(source.pk, count):
        raise ForkError(
            "inside_tool_group",
            "a fork here would keep tool calls without their results; fork before the "
            "assistant turn that made the calls or after its last result.",
            field="message_id",
        )
    if title is not None:
        named = {"title": title, "title_source": TitleSource.USER}
    else:
        named = {"title": fork_title(source), "title_source": source.title_source}
    rows = Message.objects.filter(conversation_id=source.pk, position__lt=count)
    with transaction.atomic():
        fork = Conversation.objects.create(
            owner_id=source.owner_id,
            **named,
            metadata=source.metadata,
            forked_from=source,
            forked_at_position=count,
            message_count=count,
        )
        if copy_message_rows(rows, fork.pk) != count:
            raise Conversation.DoesNotExist("the conversation was deleted while it was forked.")
        # The copies show the same attachments: index them too.
        copy_attachment_links(rows, fork.pk)
    return fork


def fork_messages(source: Conversation, rows: QuerySet[Message], owner: User) -> Conversation:
    """A fork for ``owner``, another user: a new conversation holding copies of ``rows``
    (messages of ``source``) numbered from 0 in their order, a shared snapshot
    continued (:mod:`~llm_conversations.conversations.shares`).

    It keeps the source's title as it is and records neither the source
    (``forked_from``, ``forked_at_position``: another user's) nor its metadata.
    The copies are indexed as showing the rows' attachments, which the caller
    replaces by the owner's own. ``rows`` leave out tool groups whole, if any
    (a hidden group is hidden whole); copies that would end with tool calls
    their results do not follow raise ``ForkError`` ``inside_tool_group`` and
    nothing is stored. Costs the same statements at any length.
    """
    # In the caller's transaction if there is one (without a savepoint): a
    # refused fork undoes it whole.
    with transaction.atomic(savepoint=False):
        fork = Conversation.objects.create(
            owner=owner, title=source.title, title_source=source.title_source
        )
        count = copy_message_rows(rows, fork.pk)
        if cuts_tool_group(fork.pk, count):
            raise ForkError(
                "inside_tool_group",
                "these messages end with tool calls without their results; nothing was copied.",
            )
        Conversation.objects.filter(pk=fork.pk).update(message_count=count)
        fork.message_count = count
        copy_attachment_links(rows, fork.pk)
    return fork


FORK_SUFFIX = " (fork)"
NUMBERED_FORK_SUFFIX = " (fork {n})"


def fork_title(source: Conversation) -> str:
    """The title of a new fork of ``source``: its title and `` (fork)``, numbered from the
    second fork of the same source on (`` (fork 2)``); ``""`` for an untitled source.

    The source's title is cut to leave room for the suffix (one count query,
    only for a titled source).
    """
    if not source.title:
        return ""
    earlier = Conversation.objects.filter(forked_from_id=source.pk).count()
    suffix = FORK_SUFFIX if not earlier else NUMBERED_FORK_SUFFIX.format(n=earlier + 1)
    room = (Conversation._meta.get_field("title").max_length or 200) - len(suffix)
    return source.title[:room].rstrip() + suffix
