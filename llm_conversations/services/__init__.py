"""Services: the conversation store and the tool loop built on it."""

from llm_conversations.services.loop import ConversationBusy, RunStateError, ToolLoopService
from llm_conversations.services.store import (
    ConversationRef,
    append_completion,
    append_messages,
    create_conversation,
    load_messages,
    pending_tool_call_ids,
)

__all__ = [
    "ConversationBusy",
    "ConversationRef",
    "RunStateError",
    "ToolLoopService",
    "append_completion",
    "append_messages",
    "create_conversation",
    "load_messages",
    "pending_tool_call_ids",
]
