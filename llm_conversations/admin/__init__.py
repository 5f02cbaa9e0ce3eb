"""The admin: conversations with a chat-like transcript, read-only messages, runs,
attachments, feedback, webhooks and share links.

``ConversationAdmin`` is registered for ``Conversation`` and meant to be
subclassed by host projects; see ``docs/admin.md``.
"""

from django.contrib import admin

from llm_conversations.admin.attachments import AttachmentAdmin
from llm_conversations.admin.conversations import ConversationAdmin, status_badge
from llm_conversations.admin.decisions import ToolDecisionAdmin
from llm_conversations.admin.feedback import FeedbackAdmin
from llm_conversations.admin.messages import MessageAdmin
from llm_conversations.admin.read_only import ReadOnlyAdmin
from llm_conversations.admin.runs import RunAdmin
from llm_conversations.admin.shares import ShareLinkAdmin
from llm_conversations.admin.transcript import (
    RunSummary,
    TranscriptCall,
    TranscriptEntry,
    summarise_runs,
    transcript,
)
from llm_conversations.admin.webhooks import WebhookDeliveryAdmin, WebhookEndpointAdmin
from llm_conversations.models import (
    Attachment,
    Conversation,
    Feedback,
    Message,
    Run,
    ShareLink,
    ToolDecision,
    WaitingCall,
    WebhookDelivery,
    WebhookEndpoint,
)

admin.site.register(Attachment, AttachmentAdmin)
admin.site.register(Conversation, ConversationAdmin)
admin.site.register(Feedback, FeedbackAdmin)
admin.site.register(Message, MessageAdmin)
admin.site.register(Run, RunAdmin)
admin.site.register(ShareLink, ShareLinkAdmin)
admin.site.register(ToolDecision, ToolDecisionAdmin)
admin.site.register(WebhookDelivery, WebhookDeliveryAdmin)
admin.site.register(WebhookEndpoint, WebhookEndpointAdmin)

__all__ = [
    "AttachmentAdmin",
    "ConversationAdmin",
    "FeedbackAdmin",
    "MessageAdmin",
    "ReadOnlyAdmin",
    "RunAdmin",
    "RunSummary",
    "ShareLinkAdmin",
    "ToolDecisionAdmin",
    "TranscriptCall",
    "TranscriptEntry",
    "WaitingCall",
    "WebhookDeliveryAdmin",
    "WebhookEndpointAdmin",
    "status_badge",
    "summarise_runs",
    "transcript",
]
