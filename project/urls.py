from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from project import views

urlpatterns = [
    path("", views.chat, name="chat"),
    path("examples/react-chat/", views.react_chat, name="react-chat"),
    path("examples/react-chat/app.js", views.react_chat_bundle, name="react-chat-bundle"),
    path("admin/", admin.site.urls),
    path("api/", include("llm_conversations.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("shared/", include("llm_conversations.pages.urls")),
]
