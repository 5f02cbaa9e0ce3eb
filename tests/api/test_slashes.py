"""Every path of the API answers in its JSON format, with or without the trailing slash.

The AI SDK's ``DefaultChatTransport`` users write ``api: ".../chat"``; with
Django's ``APPEND_SLASH`` a POST there was a 500 HTML page under ``DEBUG`` (a
``RuntimeError`` of ``CommonMiddleware``) and a 301 that drops the body without
it. Each route takes both forms; the schema, ``reverse()`` and the links the
API makes keep the slash.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from llm_conversations.models import Conversation, Run
from tests.api.test_ai_sdk import chat_body, parse_chunks, types, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(client: Any, user: Any, settings: Any) -> Client:
    """Django's own client, through the whole middleware stack, with DEBUG on as in the demo."""
    settings.DEBUG = True
    settings.APPEND_SLASH = True
    signed_in = Client()
    signed_in.force_login(user)
    return signed_in


def test_a_chat_post_without_the_slash_is_the_chat_endpoint(
    browser: Client, conversation: Conversation
) -> None:
    response = browser.post(
        f"/api/conversations/{conversation.pk}/chat",
        json.dumps(chat_body(user("hello"))),
        content_type="application/json",
    )
    assert response.status_code == 200
    assert types(parse_chunks(response))[-1] == "finish"
    assert Run.objects.get().status == "completed"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("get", "/api/conversations", 200),
        ("post", "/api/conversations/{c}/runs", 201),
        ("get", "/api/conversations/{c}/messages", 200),
        ("get", "/api/tools", 200),
    ],
)
def test_every_route_takes_both_forms(
    browser: Client, conversation: Conversation, method: str, path: str, status: int
) -> None:
    url = path.format(c=conversation.pk)
    body = {"data": json.dumps({"message": "hi"}), "content_type": "application/json"}
    response = getattr(browser, method)(url, **(body if method == "post" else {}))
    assert response.status_code == status, response.content[:200]
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    "path",
    [
        "/api/conversations/{c}/nothing-here/",
        "/api/conversations/{c}/nothing-here",
        "/api/conversations/{c}/runs/{c}/nothing/",
        "/api/webhooks/a/b/c",
        "/api/shared",
    ],
)
def test_a_path_of_the_api_that_names_nothing_is_a_json_404(
    browser: Client, conversation: Conversation, path: str
) -> None:
    for send in (browser.get, browser.post):
        response = send(path.format(c=conversation.pk))
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert response.json()["error"]["code"] == "not_found"


def test_a_method_a_route_does_not_take_is_a_json_405(
    browser: Client, conversation: Conversation
) -> None:
    response = browser.put(f"/api/conversations/{conversation.pk}")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_names_and_paths_outside_the_app_keep_their_form(browser: Client) -> None:
    assert reverse("llm_conversations:conversation-list") == "/api/conversations/"
    # The project's own routes under the same prefix are not the API's to answer.
    assert browser.get("/api/schema/").status_code == 200
