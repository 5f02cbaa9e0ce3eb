"""The test URLs without the app's pages: a project that mounts the API only."""

from django.urls import include, path

urlpatterns = [path("api/", include("llm_conversations.api.urls"))]
