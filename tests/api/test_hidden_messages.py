"""Hiding a message from the model through the API: kept and listed, never sent,
a tool group hidden whole, and the conversation still accepting the next run."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.models import Conversation, ConversationSummary, Message, Run, RunStatus
from llm_conversations.providers import EchoProvider
from llm_conversations.providers.base import CompletionRequest
from tests.api.conftest import API_SETTINGS, calls_text
from tests.api.test_runs import runs_url

pytestmark = pytest.mark.django_db


class Recording(EchoProvider):
    """The echo backend, remembering the messages of every request it receives."""

    requests: ClassVar[list[tuple[ChatMessage, ...]]] = []

    def send(self, request: CompletionRequest) -> Any:
        Recording.requests.append(request.messages)
        return super().send(request)


SETTINGS = {
    **API_SETTINGS,
    "DEFAULT_PROVIDER": "recording",
    "PROVIDERS": {
        **API_SETTINGS["PROVIDERS"],
        "recording": {"BACKEND": f"{__name__}.Recording", "MODEL": "echo"},
    },
}


@pytest.fixture(autouse=True)
def recording(settings: Any) -> list[tuple[ChatMessage, ...]]:
    settings.LLM_CONVERSATIONS = SETTINGS
    Recording.requests.clear()
    return Recording.requests


def messages_url(
    conversation: Conversation, message: Message | None = None, action: str = ""
) -> str:
    base = f"/api/conversations/{conversation.pk}/messages/"
    return f"{base}{message.pk}/{action}/" if message is not None else base


def run(client: APIClient, conversation: Conversation, text: str) -> dict[str, Any]:
    response = client.post(runs_url(conversation), {"message": text}, format="json")
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    assert body["status"] == "completed", body
    return body


def at(conversation: Conversation, position: int) -> Message:
    return Message.objects.get(conversation=conversation, position=position)


def sent_texts(request: tuple[ChatMessage, ...]) -> list[str]:
    return [f"{m.role.value}:{m.content or ''}" for m in request]


def error(response: Any) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def test_a_hidden_message_is_kept_listed_and_left_out_of_the_next_request(
    client: APIClient, conversation: Conversation, recording: list[Any]
) -> None:
    run(client, conversation, "secret plan")  # positions 1 (user) and 2 (answer)
    response = client.post(
        messages_url(conversation, at(conversation, 1), "hide"),
        {"reason": "pasted a password"},
        format="json",
    )
    assert response.status_code == 200, response.content
    hidden = response.json()["data"]
    assert [(m["position"], m["hidden_reason"]) for m in hidden] == [(1, "pasted a password")]
    assert hidden[0]["hidden_at"] is not None
    listed = client.get(messages_url(conversation), {"order": "asc"}).json()["data"]
    assert [(m["content"], m["hidden_at"] is not None) for m in listed] == [
        ("Hi", False),
        ("secret plan", True),
        ("secret plan", False),
    ]
    recording.clear()
    run(client, conversation, "next")
    assert sent_texts(recording[0]) == ["user:Hi", "assistant:secret plan", "user:next"]
    # Shown again, it is sent again; the reason goes with the hiding.
    shown = client.post(messages_url(conversation, at(conversation, 1), "unhide")).json()["data"]
    assert [(m["hidden_at"], m["hidden_reason"]) for m in shown] == [(None, "")]
    recording.clear()
    run(client, conversation, "again")
    assert "user:secret plan" in sent_texts(recording[0])


def test_hiding_a_tool_result_hides_its_whole_group_and_the_next_run_is_valid(
    client: APIClient, conversation: Conversation, recording: list[Any]
) -> None:
    run(
        client,
        conversation,
        calls_text(("a", "get_weather", {"city": "Oslo"}), ("b", "get_time", {})),
    )
    roles = list(Message.objects.filter(conversation=conversation).values_list("role", flat=True))
    assert roles == ["user", "user", "assistant", "tool", "tool", "assistant"]
    response = client.post(messages_url(conversation, at(conversation, 4), "hide"), format="json")
    assert [m["position"] for m in response.json()["data"]] == [2, 3, 4]
    assert set(
        Message.objects.filter(conversation=conversation, hidden_at__isnull=False).values_list(
            "position", flat=True
        )
    ) == {2, 3, 4}
    recording.clear()
    run(client, conversation, "and now?")
    sent = recording[0]
    assert not any(m.tool_calls or m.role is Role.TOOL for m in sent)
    assert [m.role.value for m in sent] == ["user", "user", "assistant", "user"]
    # Unhiding the call turn shows the group whole again.
    shown = client.post(messages_url(conversation, at(conversation, 2), "unhide")).json()["data"]
    assert [(m["position"], m["hidden_at"]) for m in shown] == [(2, None), (3, None), (4, None)]


def test_a_group_with_unanswered_calls_cannot_be_hidden(
    client: APIClient, conversation: Conversation
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    appended = client.post(
        messages_url(conversation),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        format="json",
    )
    assert appended.status_code == 201, appended.content
    response = client.post(messages_url(conversation, at(conversation, 1), "hide"), format="json")
    assert error(response) == (400, "unanswered_tool_calls")
    assert not Message.objects.filter(hidden_at__isnull=False).exists()


def test_hiding_is_refused_while_a_run_is_active_and_in_the_trash(
    client: APIClient, conversation: Conversation
) -> None:
    first = at(conversation, 0)
    active = Run.objects.create(conversation=conversation, status=RunStatus.RUNNING)
    assert error(client.post(messages_url(conversation, first, "hide"), format="json")) == (
        409,
        "conversation_busy",
    )
    active.status = RunStatus.CANCELLED
    active.save()
    assert client.delete(f"/api/conversations/{conversation.pk}/").status_code == 204
    for action in ("hide", "unhide"):
        response = client.post(messages_url(conversation, first, action), format="json")
        assert error(response) == (409, "conversation_trashed")
    assert at(conversation, 0).hidden_at is None


def test_bad_reasons_and_another_users_messages(
    client: APIClient, conversation: Conversation, other_user: User
) -> None:
    first = at(conversation, 0)
    for body in ({"reason": "x" * 501}, {"reason": 5}, {"why": "x"}):
        response = client.post(messages_url(conversation, first, "hide"), body, format="json")
        assert response.status_code == 400, body
    thief = APIClient()
    thief.force_authenticate(other_user)
    for action in ("hide", "unhide"):
        response = thief.post(messages_url(conversation, first, action), format="json")
        assert error(response) == (404, "not_found")
    assert at(conversation, 0).hidden_at is None


def test_search_titles_and_the_ai_sdk_history_leave_hidden_messages_out(
    client: APIClient, user: User
) -> None:
    created = client.post("/api/conversations/", {}, format="json").json()
    conversation = Conversation.objects.get(pk=created["id"])
    run(client, conversation, "zebra crossing")
    run(client, conversation, "giraffe")
    assert client.get("/api/conversations/", {"search": "zebra"}).json()["count"] == 1
    for position in (0, 1):  # the first question and its answer
        client.post(messages_url(conversation, at(conversation, position), "hide"), format="json")
    assert client.get("/api/conversations/", {"search": "zebra"}).json()["count"] == 0
    found = client.get(messages_url(conversation), {"search": "zebra"}).json()["data"]
    assert found == []
    history = client.get(f"/api/conversations/{conversation.pk}/chat/messages/").json()
    texts = [part.get("text") for message in history for part in message["parts"]]
    assert "zebra crossing" not in texts
    assert "giraffe" in texts


def test_hiding_drops_the_summaries_that_cover_it(
    client: APIClient, conversation: Conversation
) -> None:
    run(client, conversation, "one")
    for end in (1, 3):
        ConversationSummary.objects.create(conversation=conversation, end_position=end, content="s")
    client.post(messages_url(conversation, at(conversation, 1), "hide"), format="json")
    assert list(ConversationSummary.objects.values_list("end_position", flat=True)) == [1]
