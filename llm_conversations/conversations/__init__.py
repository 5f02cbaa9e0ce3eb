"""Stored conversations: the store and everything that reads or changes them.

The store (:mod:`~llm_conversations.conversations.store`) is the only place
that turns ``ChatMessage`` values into rows and appends turns (gap-free
positions under the conversation's row lock,
:mod:`~llm_conversations.conversations.locks`);
:mod:`~llm_conversations.conversations.history` reads them back, and
:mod:`~llm_conversations.conversations.forks` forks. Attachments, feedback,
search, titles, costs, usage, retention and idempotency keys sit beside them;
export and import are a room of their own
(:mod:`~llm_conversations.conversations.transfer`). Runs (:mod:`llm_conversations.runs`) build on this layer.
"""

from llm_conversations.conversations.history import (
    ConversationRef,
    load_messages,
    unanswered_call_ids,
)
from llm_conversations.conversations.lifecycle import create_conversation, delete_conversation
from llm_conversations.conversations.store import append_completion, append_messages

__all__ = [
    "ConversationRef",
    "append_completion",
    "append_messages",
    "create_conversation",
    "delete_conversation",
    "load_messages",
    "unanswered_call_ids",
]
