"""Stored conversations: the store and everything that reads or changes them.

The store (:mod:`~llm_conversations.conversations.store`) is the only place
that turns rows into ``ChatMessage`` values and back and appends turns (gap-free
positions under the conversation's row lock); attachments, feedback, search,
titles, costs, usage, export and import, retention and idempotency keys sit
beside it. Runs (:mod:`llm_conversations.runs`) build on this layer.
"""

from llm_conversations.conversations.store import (
    ConversationRef,
    append_completion,
    append_messages,
    create_conversation,
    delete_conversation,
    load_messages,
    pending_tool_call_ids,
)

__all__ = [
    "ConversationRef",
    "append_completion",
    "append_messages",
    "create_conversation",
    "delete_conversation",
    "load_messages",
    "pending_tool_call_ids",
]
