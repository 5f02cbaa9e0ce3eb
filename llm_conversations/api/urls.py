"""URLs of the API: ``path("api/", include("llm_conversations.api.urls"))``.

One DRF router names every route. Ids are matched as any path segment
(``lookup_value_regex`` on the views, and the nested prefixes below) and
checked by the views, so a malformed id is the API's JSON 404 rather than the
project's HTML one.

Every route also takes its path without the trailing slash (the AI SDK's
``DefaultChatTransport`` is given ``.../chat``): under ``APPEND_SLASH`` Django
could only redirect it, which a POST cannot follow (a 500 page with ``DEBUG``).
Those patterns are unnamed and out of the schema, so ``reverse()``, the schema
and every link keep the slash. Any other path under the app's prefixes is the
API's JSON 404 (:func:`~llm_conversations.api.views.base.not_found`); the host's
own routes beside them (``api/schema/``) are left alone.
"""

from typing import Any

from django.urls import URLPattern, URLResolver, re_path
from rest_framework.routers import SimpleRouter

from llm_conversations.api.views import (
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
    WaitingCallViewSet,
    WebhookEndpointViewSet,
)
from llm_conversations.api.views.base import not_found

app_name = "llm_conversations"

# Any segment, like the lookups: the views answer 404 for an id that is not a UUID.
_CONVERSATION = "conversations/(?P<conversation_pk>[^/]+)"

router = SimpleRouter()
router.register("conversations", ConversationViewSet, basename="conversation")
# fork/, forks/, edit/ and regenerate/ of one conversation.
router.register(_CONVERSATION, ForkViewSet, basename="fork")
router.register(f"{_CONVERSATION}/messages", MessageViewSet, basename="message")
router.register(f"{_CONVERSATION}/runs", RunViewSet, basename="run")
# A run's decision trail: a view of its own beside the run's.
router.register(
    f"{_CONVERSATION}/runs/(?P<run_pk>[^/]+)/decisions", DecisionViewSet, basename="decision"
)
router.register(f"{_CONVERSATION}/chat", ChatViewSet, basename="chat")
router.register(f"{_CONVERSATION}/shares", ShareLinkViewSet, basename="share")
router.register("tools", ToolViewSet, basename="tool")
router.register("attachments", AttachmentViewSet, basename="attachment")
router.register("providers", ProviderViewSet, basename="provider")
router.register("waiting-calls", WaitingCallViewSet, basename="waiting-call")
router.register("webhooks", WebhookEndpointViewSet, basename="webhook")
# A shared snapshot, by the token of its link (docs/sharing.md).
router.register("shared", SharedViewSet, basename="shared")


def _without_slash(patterns: list[URLPattern | URLResolver]) -> list[URLPattern]:
    """Each of the router's routes again without its trailing slash: unnamed, and the
    view built with ``schema=None`` so the schema lists each route once."""
    again = []
    for pattern in patterns:
        regex = pattern.pattern.regex.pattern
        if not isinstance(pattern, URLPattern) or not regex.endswith("/$"):
            continue
        view: Any = pattern.callback
        callback = view.cls.as_view(view.actions, **{**view.initkwargs, "schema": None})
        again.append(re_path(regex.removesuffix("/$") + "$", callback, pattern.default_args))
    return again


# The app's top-level prefixes: a path under one that no route takes is a JSON 404.
_PREFIXES = "|".join(sorted({prefix.split("/", 1)[0] for prefix, _, _ in router.registry}))

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
    *_without_slash(router.urls),
    re_path(rf"^(?:{_PREFIXES})(?:/.*)?$", not_found),
]
