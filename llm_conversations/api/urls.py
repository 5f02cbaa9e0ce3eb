"""URLs of the API: ``path("api/", include("llm_conversations.api.urls"))``.

One DRF router names every route. Ids are matched as any path segment
(``lookup_value_regex`` on the views, and the nested prefixes below) and
checked by the views, so a malformed id is the API's JSON 404 rather than the
project's HTML one.
"""

from django.urls import re_path
from rest_framework.routers import SimpleRouter

from llm_conversations.api.views import (
    ApprovalViewSet,
    AttachmentViewSet,
    ChatViewSet,
    ConversationViewSet,
    DecisionViewSet,
    ForkViewSet,
    MessageViewSet,
    ProviderViewSet,
    RunViewSet,
    SharedViewSet,
    ShareLinkViewSet,
    ToolViewSet,
    WebhookEndpointViewSet,
)

app_name = "llm_conversations"

# Any segment, like the lookups: the views answer 404 for an id that is not a UUID.
_CONVERSATION = "conversations/(?P<conversation_pk>[^/]+)"

router = SimpleRouter()
router.register("conversations", ConversationViewSet, basename="conversation")
# fork/, forks/, edit/ and regenerate/ of one conversation.
router.register(_CONVERSATION, ForkViewSet, basename="fork")
router.register(f"{_CONVERSATION}/messages", MessageViewSet, basename="message")
router.register(f"{_CONVERSATION}/runs", RunViewSet, basename="run")
# A run's approvals trail: a view of its own beside the run's.
router.register(
    f"{_CONVERSATION}/runs/(?P<run_pk>[^/]+)/decisions", DecisionViewSet, basename="decision"
)
router.register(f"{_CONVERSATION}/chat", ChatViewSet, basename="chat")
router.register(f"{_CONVERSATION}/shares", ShareLinkViewSet, basename="share")
router.register("tools", ToolViewSet, basename="tool")
router.register("attachments", AttachmentViewSet, basename="attachment")
router.register("providers", ProviderViewSet, basename="provider")
router.register("approvals", ApprovalViewSet, basename="approval")
router.register("webhooks", WebhookEndpointViewSet, basename="webhook")
# A shared snapshot, by the token of its link (docs/sharing.md).
router.register("shared", SharedViewSet, basename="shared")

urlpatterns = [
    # The AI SDK's reconnect and stop requests name no trailing slash: it is optional here.
    re_path(
        rf"^{_CONVERSATION}/chat/(?P<chat_id>[^/]+)/stream/?$",
        ChatViewSet.as_view({"get": "stream"}),
        name="chat-stream",
    ),
    re_path(
        rf"^{_CONVERSATION}/chat/(?P<chat_id>[^/]+)/stop/?$",
        ChatViewSet.as_view({"post": "stop"}),
        name="chat-stop",
    ),
    *router.urls,
]
