"""URLs of the API: ``path("api/", include("llm_conversations.api.urls"))``.

Ids are matched as any path segment and checked by the views, so a malformed
id is the API's JSON 404 rather than the project's HTML one.
"""

from django.db import transaction
from django.urls import path

from llm_conversations.api.views import (
    ConversationViewSet,
    MessageViewSet,
    RunViewSet,
    ToolViewSet,
)

app_name = "llm_conversations"

_run_action = "conversations/<str:conversation_pk>/runs/<str:run_pk>/{}/"

urlpatterns = [
    path(
        "conversations/",
        ConversationViewSet.as_view({"get": "list", "post": "create"}),
        name="conversation-list",
    ),
    path(
        "conversations/<str:pk>/",
        ConversationViewSet.as_view(
            {"get": "retrieve", "patch": "partial_update", "delete": "destroy"}
        ),
        name="conversation-detail",
    ),
    path(
        "conversations/<str:conversation_pk>/messages/",
        MessageViewSet.as_view({"get": "page", "post": "create"}),
        name="message-list",
    ),
    path(
        "conversations/<str:conversation_pk>/runs/",
        # Runs call providers and tools: never inside ATOMIC_REQUESTS' transaction.
        transaction.non_atomic_requests(RunViewSet.as_view({"post": "create"})),
        name="run-list",
    ),
    path(
        "conversations/<str:conversation_pk>/runs/<str:run_pk>/",
        RunViewSet.as_view({"get": "retrieve"}),
        name="run-detail",
    ),
    *(
        path(
            _run_action.format(action),
            transaction.non_atomic_requests(RunViewSet.as_view({"post": action})),
            name=f"run-{action.replace('_', '-')}",
        )
        for action in ("approve", "deny", "submit_tool_outputs", "cancel")
    ),
    path("tools/", ToolViewSet.as_view({"get": "list"}), name="tool-list"),
]
