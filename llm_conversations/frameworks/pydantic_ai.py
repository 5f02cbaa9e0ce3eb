"""pydantic-ai message history in and out of a conversation (the ``pydantic-ai`` extra).

``load_model_messages(conversation)`` is the ``message_history`` of an agent's run,
``store_model_messages(conversation, result.new_messages())`` keeps what the run
added as typed turns (:mod:`.pydantic_ai_messages` says how), through the store's
rules. The round trip through ``ModelMessagesTypeAdapter`` is exact for what
pydantic-ai stored; turns this app made (its own loop, another framework) load as
plain parts. Messages the staff hid are left out, as the app's loop leaves them.
"""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import sync_to_async
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from llm_conversations.conversations.history import ConversationRef, load_turns
from llm_conversations.conversations.store import append_turns
from llm_conversations.frameworks.pydantic_ai_messages import ROW_FIELDS, messages_of, turns_of
from llm_conversations.models import Message

__all__ = [
    "aload_model_messages",
    "astore_model_messages",
    "load_model_messages",
    "store_model_messages",
]


def load_model_messages(conversation: ConversationRef) -> list[ModelMessage]:
    """The conversation as pydantic-ai messages, oldest first, in one query."""
    rows = [
        (chat, row)
        for chat, row in load_turns(conversation, *ROW_FIELDS)
        if row["hidden_at"] is None
    ]
    return ModelMessagesTypeAdapter.validate_python(messages_of(rows))


def store_model_messages(
    conversation: ConversationRef, messages: Sequence[ModelMessage]
) -> list[Message]:
    """Append ``messages`` (a run's ``new_messages()``) as turns, in one transaction;
    nothing is stored when one is refused (``InvalidMessage`` naming the part)."""
    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    return append_turns(conversation, turns_of(dumped))


async def aload_model_messages(conversation: ConversationRef) -> list[ModelMessage]:
    """:func:`load_model_messages` from async code."""
    return await sync_to_async(load_model_messages)(conversation)


async def astore_model_messages(
    conversation: ConversationRef, messages: Sequence[ModelMessage]
) -> list[Message]:
    """:func:`store_model_messages` from async code."""
    return await sync_to_async(store_model_messages)(conversation, messages)
