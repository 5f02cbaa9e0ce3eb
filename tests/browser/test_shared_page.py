"""A share link's page in a real headless Chromium: a signed-in reader continues it as a
copy through its form, which the browser posts with the page's own origin."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.conversations.shares import create_share
from llm_conversations.core.messages import ChatMessage
from llm_conversations.models import Conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def signed_in(page: Any, live_server: Any, user: Any) -> None:
    """The browser holds ``user``'s session (readers need not be staff to sign in)."""
    client = Client()
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    page.context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}]
    )


def test_a_reader_continues_the_shared_page_as_a_fork(page: Any, live_server: Any) -> None:
    users = get_user_model()
    owner, reader = users.objects.create_user("owner"), users.objects.create_user("reader")
    trip = create_conversation(
        owner=owner,
        title="Trip",
        messages=[ChatMessage.user("Weather in Oslo?"), ChatMessage.assistant("Rain.")],
    )
    token = create_share(trip).token
    signed_in(page, live_server, reader)
    page.goto(f"{live_server.url}/shared/{token}/")
    assert page.locator("h1").inner_text() == "Trip"
    with page.expect_response(lambda response: response.url.endswith("/fork/")) as answer:
        page.click("text=Continue as a fork")
    response = answer.value
    # The form's POST carries the page's origin, which Django's CSRF check accepts.
    assert response.request.header_value("origin") == live_server.url
    assert response.status == 201, response.text()
    page.locator("text=Forked.").wait_for()
    copy = Conversation.objects.get(owner=reader)
    assert str(copy.pk) in page.content()
    assert load_messages(copy) == load_messages(trip)
    # Links from the page to other sites still get no referrer (nor the token).
    policy = page.evaluate("document.querySelector('meta[name=referrer]').content")
    assert policy == "same-origin"
