"""Forks: a new conversation holding copies of another's first messages
(:func:`fork_conversation`, and its title, :func:`fork_title`), the rows copied
inside the database.

A fork never ends with tool calls their results do not follow; that is checked
first. Then one ``INSERT ... SELECT`` copies any number of rows: no row travels
through Python, and the statement count does not grow with the history. The
copies are checked by the database like any insert (constraints and the
triggers of migration 0002).
"""

from __future__ import annotations

import uuid
from functools import partial

from django.db import connections, router, transaction

from llm_conversations.conversations.history import cuts_tool_group
from llm_conversations.exceptions import ForkError
from llm_conversations.models import Conversation, Message, MessageAttachment, TitleSource
from llm_conversations.users import User

__all__ = [
    "copy_attachment_links",
    "copy_message_rows",
    "fork_conversation",
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


def fork_conversation(
    source: Conversation,
    count: int,
    *,
    title: str | None = None,
    owner: User | None = None,
) -> Conversation:
    """A new conversation of the same owner holding copies of ``source``'s first
    ``count`` messages, recording where it came from.

    Without ``title`` the fork is named after its source so lists tell them
    apart (:func:`fork_title`: ``Trip (fork)``, then ``Trip (fork 2)``, ...),
    keeping who set it; an untitled source gives an untitled fork, which an
    automatic title fills after its first run. A ``title`` given is the user's.

    An ``owner`` other than the source's makes a copy for that user (a shared
    snapshot continued as a copy, :mod:`~llm_conversations.conversations.sharing`):
    it keeps the source's title as it is and records neither the source
    (``forked_from``, ``forked_at_position``: another user's) nor its metadata.

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
    foreign = owner is not None and owner.pk != source.owner_id
    if title is not None:
        named = {"title": title, "title_source": TitleSource.USER}
    else:
        named = {
            "title": source.title if foreign else fork_title(source),
            "title_source": source.title_source,
        }
    with transaction.atomic():
        fork = Conversation.objects.create(
            owner_id=owner.pk if owner is not None and foreign else source.owner_id,
            **named,
            metadata={} if foreign else source.metadata,
            forked_from=None if foreign else source,
            forked_at_position=None if foreign else count,
            message_count=count,
        )
        if copy_message_rows(source.pk, fork.pk, count) != count:
            raise Conversation.DoesNotExist("the conversation was deleted while it was forked.")
        # The copies show the same attachments: index them too.
        copy_attachment_links(source.pk, fork.pk, count)
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
