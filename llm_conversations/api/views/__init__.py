"""The API's views."""

from llm_conversations.api.views.conversations import (
    ConversationPagination,
    ConversationViewSet,
    MessageViewSet,
)
from llm_conversations.api.views.providers import ProviderViewSet
from llm_conversations.api.views.runs import RunViewSet
from llm_conversations.api.views.tools import ToolViewSet

__all__ = [
    "ConversationPagination",
    "ConversationViewSet",
    "MessageViewSet",
    "ProviderViewSet",
    "RunViewSet",
    "ToolViewSet",
]
