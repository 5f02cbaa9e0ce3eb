"""Services: the conversation store and the tool loop built on it.

Only this layer opens transactions, takes locks and applies the
conversation-level rules; the API, the admin and the commands call it.
"""

from llm_conversations.exceptions import ConversationBusy, RunStateError
from llm_conversations.services.loop import RunRef, ToolLoopService
from llm_conversations.services.store import (
    ConversationRef,
    append_completion,
    append_messages,
    create_conversation,
    delete_conversation,
    load_messages,
    pending_tool_call_ids,
)

__all__ = [
    "ConversationBusy",
    "ConversationRef",
    "RunRef",
    "RunStateError",
    "ToolLoopService",
    "append_completion",
    "append_messages",
    "create_conversation",
    "delete_conversation",
    "load_messages",
    "pending_tool_call_ids",
]
