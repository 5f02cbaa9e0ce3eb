"""Services: the conversation store (and, built on it, the tool loop)."""

from llm_conversations.services.store import (
    ConversationRef,
    append_completion,
    append_messages,
    create_conversation,
    load_messages,
    pending_tool_call_ids,
)

__all__ = [
    "ConversationRef",
    "append_completion",
    "append_messages",
    "create_conversation",
    "load_messages",
    "pending_tool_call_ids",
]
