"""Reading a stored conversation: its messages as value objects, in order, and the
tail the sequence rules need (from the last assistant turn on).

:data:`ConversationRef` (a conversation or its id) is what the store
(:mod:`~llm_conversations.conversations.store`), the locks
(:mod:`~llm_conversations.conversations.locks`) and the copies
(:mod:`~llm_conversations.conversations.forks`) take.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from django.db.models import Subquery

from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.sequence import unanswered_tool_call_ids
from llm_conversations.core.stored_rows import chat_message_from_checked_row
from llm_conversations.models import (
    MESSAGE_COLUMNS,
    Conversation,
    Message,
    chat_messages_of,
    conversation_history,
    conversation_messages,
)

__all__ = [
    "ConversationRef",
    "conversation_pk",
    "cuts_tool_group",
    "load_history",
    "load_messages",
    "load_turns",
    "stored_message",
    "tail_messages",
    "unanswered_call_ids",
]

ConversationRef = Conversation | uuid.UUID | str
"""A conversation or its id."""


def conversation_pk(conversation: ConversationRef) -> uuid.UUID:
    """The id of a conversation given as an instance, a UUID or its text."""
    if isinstance(conversation, Conversation):
        return conversation.pk
    return conversation if isinstance(conversation, uuid.UUID) else uuid.UUID(str(conversation))


def load_messages(conversation: ConversationRef) -> list[ChatMessage]:
    """The whole conversation as value objects, in order, in one query."""
    return conversation_messages(conversation_pk(conversation))


def load_history(conversation: ConversationRef) -> tuple[list[ChatMessage], frozenset[int]]:
    """The whole conversation as value objects, in order, and the positions of
    its hidden messages (the model is not sent them), in one query."""
    return conversation_history(conversation_pk(conversation))


def stored_message(row: Message | Mapping[str, Any]) -> ChatMessage:
    """The message of a stored row: a ``Message``, or a row read with ``values()``
    of at least ``MESSAGE_COLUMNS``.

    The one way the layers above read a row as a value object (a history is
    loaded whole by :func:`load_messages`). The checked path: what the
    database checked is not validated again.
    """
    if isinstance(row, Message):
        return chat_message_from_checked_row(*(getattr(row, name) for name in MESSAGE_COLUMNS))
    return chat_message_from_checked_row(*(row[name] for name in MESSAGE_COLUMNS))


def load_turns(
    conversation: ConversationRef, *fields: str
) -> list[tuple[ChatMessage, dict[str, Any]]]:
    """The whole conversation in order, each message with the values of the other
    ``fields`` of its row (``metadata``, ``model``, ``hidden_at``, ...), in one query."""
    rows = (
        Message.objects.filter(conversation_id=conversation_pk(conversation))
        .order_by("position")
        .values(*MESSAGE_COLUMNS, *fields)
    )
    return [(stored_message(row), {name: row[name] for name in fields}) for row in rows]


def tail_messages(conversation_id: uuid.UUID, before: int | None = None) -> list[ChatMessage]:
    """The messages from the last assistant turn on: all the sequence rules need.

    ``before``: of the first ``before`` messages only.
    """
    earlier = {} if before is None else {"position__lt": before}
    last_assistant = (
        Message.objects.filter(conversation_id=conversation_id, role=Role.ASSISTANT, **earlier)
        .order_by("-position")
        .values("position")[:1]
    )
    return chat_messages_of(
        Message.objects.filter(
            conversation_id=conversation_id, position__gte=Subquery(last_assistant), **earlier
        ).order_by("position")
    )


def unanswered_call_ids(conversation: ConversationRef) -> tuple[str, ...]:
    """Ids of the calls of the last assistant turn that no tool turn answers yet."""
    return unanswered_tool_call_ids(tail_messages(conversation_pk(conversation)))


def cuts_tool_group(conversation: ConversationRef, count: int) -> bool:
    """Whether the first ``count`` messages end with tool calls their results do not
    follow (a fork or a shared snapshot there would not be a valid history)."""
    return bool(
        unanswered_tool_call_ids(tail_messages(conversation_pk(conversation), before=count))
    )
