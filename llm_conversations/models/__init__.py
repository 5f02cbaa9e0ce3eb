"""The app's models: conversations with their messages, and runs of the tool loop."""

from llm_conversations.models.conversations import (
    MAX_ID_CHARS,
    MESSAGE_FIELDS,
    ROLE_CHOICES,
    Conversation,
    Message,
    chat_message_from_row,
)
from llm_conversations.models.events import RunEvent, RunEventType
from llm_conversations.models.idempotency import IdempotencyKey
from llm_conversations.models.runs import (
    ACTIVE_RUN_STATUSES,
    Decision,
    PendingCall,
    Run,
    RunStatus,
    TerminationReason,
    WaitReason,
)

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "MAX_ID_CHARS",
    "MESSAGE_FIELDS",
    "ROLE_CHOICES",
    "Conversation",
    "Decision",
    "IdempotencyKey",
    "Message",
    "PendingCall",
    "Run",
    "RunEvent",
    "RunEventType",
    "RunStatus",
    "TerminationReason",
    "WaitReason",
    "chat_message_from_row",
]
