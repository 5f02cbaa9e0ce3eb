"""URLs of the app's pages: ``path("shared/", include("llm_conversations.pages.urls"))``."""

from django.urls import path

from llm_conversations.pages.shares import shared_attachment, shared_fork, shared_page

app_name = "llm_conversations_pages"

urlpatterns = [
    path("<str:token>/", shared_page, name="shared"),
    path("<str:token>/fork/", shared_fork, name="shared-fork"),
    path(
        "<str:token>/attachments/<str:attachment_id>/",
        shared_attachment,
        name="shared-attachment",
    ),
]
