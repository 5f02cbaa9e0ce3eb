"""Titles through the API: a client's title is the user's; an automatic one is written
after the response of the request that ran the conversation's first answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.core.signals import request_finished
from rest_framework.test import APIClient

from llm_conversations.conversations import after_response, create_conversation
from llm_conversations.conversations.titles import write_title
from llm_conversations.models import Conversation
from tests.support.title_server import TitleServer, reply

URL = "/api/conversations/"
RUN_QUEUED = "llm_conversations.conversations.after_response.run"


def runs_url(conversation: Conversation) -> str:
    return f"{URL}{conversation.pk}/runs/"


@pytest.fixture
def events(title_server: TitleServer) -> Iterator[list[str]]:
    """What happens in order: the request finishing, the title request."""
    seen: list[str] = []

    def finished(**kwargs: Any) -> None:
        seen.append("request finished")

    title_server.before_reply = lambda: seen.append("title requested")
    # The recorder goes before the queued work, which is connected again after it.
    request_finished.disconnect(dispatch_uid=RUN_QUEUED)
    request_finished.connect(finished)
    request_finished.connect(after_response.run_queued, dispatch_uid=RUN_QUEUED)
    yield seen
    request_finished.disconnect(finished)


@pytest.mark.django_db
class TestUserTitles:
    def test_a_title_sent_is_the_users(self, client: APIClient) -> None:
        created = client.post(URL, {"title": "Trip"}, format="json").json()
        assert created["title_source"] == "user"
        untitled = client.post(URL, {}, format="json").json()
        assert (untitled["title"], untitled["title_source"]) == ("", None)
        path = f"{URL}{untitled['id']}/"
        changed = client.patch(path, {"metadata": {"a": 1}}, format="json").json()
        assert changed["title_source"] is None
        changed = client.patch(path, {"title": ""}, format="json").json()
        assert (changed["title"], changed["title_source"]) == ("", "user")

    def test_a_title_cleared_by_the_user_stays_empty(
        self, client: APIClient, user: User, title_server: TitleServer
    ) -> None:
        conversation = create_conversation(owner=user, messages=[{"role": "user", "content": "Hi"}])
        client.patch(f"{URL}{conversation.pk}/", {"title": ""}, format="json")
        assert write_title(conversation.pk) is None
        assert title_server.requests == []


@pytest.mark.django_db(transaction=True)
class TestAutomaticTitles:
    def test_an_in_request_run_is_titled_after_its_response(
        self, client: APIClient, user: User, title_server: TitleServer, events: list[str]
    ) -> None:
        conversation = create_conversation(owner=user)
        title_server.replies = [reply("Ferry times")]
        response = client.post(runs_url(conversation), {"message": "Ferry times?"}, format="json")
        assert (response.status_code, response.json()["status"]) == (201, "completed")
        assert events == ["request finished", "title requested"]
        body = client.get(f"{URL}{conversation.pk}/").json()
        assert (body["title"], body["title_source"]) == ("Ferry times", "auto")

    def test_a_streamed_run_sends_every_event_before_the_title_is_asked_for(
        self, client: APIClient, user: User, title_server: TitleServer, events: list[str]
    ) -> None:
        conversation = create_conversation(owner=user)
        title_server.replies = [reply("Ferry times")]
        response = client.post(
            runs_url(conversation), {"message": "Ferry times?", "stream": True}, format="json"
        )
        stream = b""
        for chunk in response.streaming_content:
            stream += chunk
            assert title_server.requests == []
        assert b"event: run.completed" in stream
        assert events == ["request finished", "title requested"]
        conversation.refresh_from_db()
        assert conversation.title == "Ferry times"

    def test_a_failing_title_provider_changes_nothing_in_the_answer(
        self, client: APIClient, user: User, title_server: TitleServer
    ) -> None:
        conversation = create_conversation(owner=user)
        title_server.replies = [httpx.ConnectError("refused")]
        response = client.post(runs_url(conversation), {"message": "Hi"}, format="json")
        assert (response.status_code, response.json()["status"]) == (201, "completed")
        assert len(title_server.requests) == 1
        conversation.refresh_from_db()
        assert (conversation.title, conversation.title_source) == ("", "")

    def test_a_titled_conversation_asks_for_no_title(
        self, client: APIClient, user: User, title_server: TitleServer
    ) -> None:
        conversation = create_conversation(owner=user, title="Trip")
        client.post(runs_url(conversation), {"message": "Hi"}, format="json")
        assert title_server.requests == []
