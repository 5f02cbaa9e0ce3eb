"""URLs of the app's test suite: the admin, the API and its schema, the pages."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("llm_conversations.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("shared/", include("llm_conversations.pages.urls")),
]
