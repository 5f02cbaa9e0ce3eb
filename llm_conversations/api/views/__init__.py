"""The API's views."""

from llm_conversations.api.views.attachments import AttachmentViewSet
from llm_conversations.api.views.chat import ChatViewSet
from llm_conversations.api.views.conversations import (
    ConversationPagination,
    ConversationViewSet,
    MessageViewSet,
)
from llm_conversations.api.views.decisions import DecisionViewSet
from llm_conversations.api.views.forks import ForkViewSet
from llm_conversations.api.views.providers import ProviderViewSet
from llm_conversations.api.views.runs import RunViewSet
from llm_conversations.api.views.shares import SharedViewSet, ShareLinkViewSet
from llm_conversations.api.views.tools import ToolViewSet
from llm_conversations.api.views.waiting_calls import WaitingCallViewSet
from llm_conversations.api.views.webhooks import WebhookEndpointViewSet

__all__ = [
    "AttachmentViewSet",
    "ChatViewSet",
    "ConversationPagination",
    "ConversationViewSet",
    "DecisionViewSet",
    "ForkViewSet",
    "MessageViewSet",
    "ProviderViewSet",
    "RunViewSet",
    "ShareLinkViewSet",
    "SharedViewSet",
    "ToolViewSet",
    "WaitingCallViewSet",
    "WebhookEndpointViewSet",
]
