"""The app's models: conversations with their messages and attachments, runs of the tool
loop, feedback, webhooks, share links."""

from llm_conversations.models.attachments import Attachment, MessageAttachment, PartKind
from llm_conversations.models.conversations import (
    MAX_ID_CHARS,
    MESSAGE_COLUMNS,
    MESSAGE_FIELDS,
    ROLE_CHOICES,
    USAGE_COLUMNS,
    Conversation,
    Message,
    TitleSource,
)
from llm_conversations.models.decisions import MAX_REASON_CHARS, ToolDecision
from llm_conversations.models.feedback import MAX_COMMENT_CHARS, Feedback, Rating
from llm_conversations.models.idempotency import IdempotencyKey
from llm_conversations.models.message_rows import (
    chat_messages_of,
    conversation_history,
    conversation_messages,
    message_page,
    message_position,
)
from llm_conversations.models.run_events import DELTAS, RunEvent, RunEventType
from llm_conversations.models.run_states import (
    ACTIVE_RUN_STATUSES,
    ENDED_RUN_STATUSES,
    RunStatus,
    TerminationReason,
)
from llm_conversations.models.runs import Run
from llm_conversations.models.shares import TOKEN_HASH_CHARS, SharedMessage, ShareLink
from llm_conversations.models.summaries import ConversationSummary
from llm_conversations.models.waiting_calls import Decision, WaitingCall, WaitReason
from llm_conversations.models.webhooks import (
    DeliveryStatus,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "DELTAS",
    "ENDED_RUN_STATUSES",
    "MAX_COMMENT_CHARS",
    "MAX_ID_CHARS",
    "MAX_REASON_CHARS",
    "MESSAGE_COLUMNS",
    "MESSAGE_FIELDS",
    "ROLE_CHOICES",
    "TOKEN_HASH_CHARS",
    "USAGE_COLUMNS",
    "Attachment",
    "Conversation",
    "ConversationSummary",
    "Decision",
    "DeliveryStatus",
    "Feedback",
    "IdempotencyKey",
    "Message",
    "MessageAttachment",
    "PartKind",
    "Rating",
    "Run",
    "RunEvent",
    "RunEventType",
    "RunStatus",
    "ShareLink",
    "SharedMessage",
    "TerminationReason",
    "TitleSource",
    "ToolDecision",
    "WaitReason",
    "WaitingCall",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEvent",
    "chat_messages_of",
    "conversation_history",
    "conversation_messages",
    "message_page",
    "message_position",
]
