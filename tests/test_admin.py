"""The admin: changelist without N+1 queries, a transcript pairing calls and results."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from llm_conversations.messages import ChatMessage, ToolCall
from llm_conversations.models import Conversation, Message
from llm_conversations.services import create_conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client() -> Client:
    user = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def test_changelist_queries_do_not_grow_with_rows(staff_client: Client) -> None:
    owner = get_user_model().objects.create_user("owner")
    url = reverse("admin:llm_conversations_conversation_changelist")

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            response = staff_client.get(url)
        assert response.status_code == 200
        return len(queries)

    create_conversation(owner=owner, title="one", messages=[ChatMessage.user("x")])
    few = count()
    for i in range(10):
        create_conversation(owner=owner, title=f"c{i}", messages=[ChatMessage.user("x")])
    assert count() == few


def test_changelist_search_by_title_and_owner(staff_client: Client) -> None:
    owner = get_user_model().objects.create_user("alice")
    create_conversation(owner=owner, title="Holiday plans")
    create_conversation(title="Other")
    url = reverse("admin:llm_conversations_conversation_changelist")
    assert "Holiday plans" in staff_client.get(url, {"q": "holiday"}).content.decode()
    by_owner = staff_client.get(url, {"q": "alice"}).content.decode()
    assert "Holiday plans" in by_owner
    assert "Other" not in by_owner


def test_transcript_pairs_each_result_with_its_call(staff_client: Client) -> None:
    conversation = create_conversation(
        title="tools",
        messages=[
            ChatMessage.user("Weather?"),
            ChatMessage.assistant_tool_calls(
                [
                    ToolCall("call_1", "get_weather", {"city": "<Paris>"}),
                    ToolCall("call_2", "get_time", {}),
                ]
            ),
            ChatMessage.tool_result("call_2", "09:00"),
            ChatMessage.tool_result("call_1", "rain & wind", is_error=True),
        ],
    )
    url = reverse("admin:llm_conversations_conversation_change", args=[conversation.pk])
    with CaptureQueriesContext(connection) as queries:
        html = staff_client.get(url).content.decode()
    # Session, user, conversation, messages, and the admin's own lookups.
    assert len(queries) <= 8
    card_1 = html[html.index('id="call-call_1"') : html.index('id="call-call_2"')]
    card_2 = html[html.index('id="call-call_2"') :]
    assert "get_weather" in card_1
    assert "&quot;city&quot;: &quot;&lt;Paris&gt;&quot;" in card_1  # pretty-printed, escaped
    assert "rain &amp; wind" in card_1
    assert "llmconv-result llmconv-error" in card_1
    assert "09:00" in card_2
    # Paired results are shown under their call, not again as rows.
    assert 'id="message-2"' not in html
    assert 'id="message-3"' not in html


def test_message_admin_is_read_only_with_role_filter(staff_client: Client) -> None:
    conversation = create_conversation(messages=[ChatMessage.user("hello there")])
    message = Message.objects.get(conversation=conversation)
    changelist = reverse("admin:llm_conversations_message_changelist")
    assert "hello there" in staff_client.get(changelist, {"role__exact": "user"}).content.decode()
    assert (
        "hello there" not in staff_client.get(changelist, {"role__exact": "tool"}).content.decode()
    )
    assert staff_client.get(reverse("admin:llm_conversations_message_add")).status_code == 403
    response = staff_client.post(
        reverse("admin:llm_conversations_message_change", args=[message.pk]),
        {"content": "rewritten"},
    )
    assert response.status_code == 403
    message.refresh_from_db()
    assert message.content == "hello there"


def test_conversation_delete_is_allowed(staff_client: Client) -> None:
    conversation = create_conversation(messages=[ChatMessage.user("x")])
    url = reverse("admin:llm_conversations_conversation_delete", args=[conversation.pk])
    assert staff_client.post(url, {"post": "yes"}).status_code == 302
    assert not Conversation.objects.exists()
    assert not Message.objects.exists()
