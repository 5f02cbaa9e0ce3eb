"""fork/, forks/, edit/ and regenerate/: new conversations; the original never changes."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.models import Conversation, Message, Run
from tests.api.conftest import calls_text, parse_sse

pytestmark = pytest.mark.django_db


@pytest.fixture
def source(user: User) -> Conversation:
    """0 user, 1 assistant calls a+b, 2 tool a, 3 tool b, 4 assistant, 5 user, 6 assistant."""
    return create_conversation(
        owner=user,
        title="Trip",
        messages=[
            ChatMessage.user("Weather?"),
            ChatMessage.assistant_tool_calls(
                [ToolCall("a", "get_weather", {"city": "Oslo"}), ToolCall("b", "get_time", {})]
            ),
            ChatMessage.tool_result("a", "rain"),
            ChatMessage.tool_result("b", "09:00"),
            ChatMessage.assistant("Rain at nine."),
            ChatMessage.user("Thanks"),
            ChatMessage.assistant("Welcome"),
        ],
    )


def url(conversation: Conversation, action: str) -> str:
    return f"/api/conversations/{conversation.pk}/{action}/"


def message_id(conversation: Conversation, position: int) -> str:
    return str(Message.objects.get(conversation=conversation, position=position).pk)


def state(client: APIClient, conversation: Conversation) -> tuple[Any, ...]:
    """The conversation as the API shows it, and its rows."""
    shown = client.get(f"/api/conversations/{conversation.pk}/").json()
    rows = list(Message.objects.filter(conversation=conversation).order_by("position").values())
    return shown, rows, list(Run.objects.filter(conversation=conversation).values())


def test_fork_answers_the_new_conversation(client: APIClient, source: Conversation) -> None:
    before = state(client, source)
    response = client.post(
        url(source, "fork"), {"message_id": message_id(source, 4)}, format="json"
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert (data["forked_from"], data["forked_at_position"]) == (str(source.pk), 5)
    assert (data["message_count"], data["title"], data["active_run"]) == (5, "Trip (fork)", None)
    assert state(client, source) == before
    copy = Conversation.objects.get(pk=data["id"])
    assert load_messages(copy) == load_messages(source)[:5]
    shown = client.get(f"/api/conversations/{copy.pk}/").json()
    assert shown["forked_from"] == str(source.pk)


@pytest.mark.parametrize("position", [1, 2])
def test_fork_inside_a_tool_group_is_refused(
    client: APIClient, source: Conversation, position: int
) -> None:
    before = state(client, source)
    response = client.post(
        url(source, "fork"), {"message_id": message_id(source, position)}, format="json"
    )
    assert response.status_code == 400
    assert (response.json()["error"]["code"], response.json()["error"]["field"]) == (
        "inside_tool_group",
        "message_id",
    )
    assert state(client, source) == before
    assert Conversation.objects.count() == 1


def test_another_users_conversation_cannot_be_forked(client: APIClient, other_user: User) -> None:
    theirs = create_conversation(owner=other_user, messages=[ChatMessage.user("secret")])
    for action in ("fork", "edit", "regenerate", "forks"):
        call = client.get if action == "forks" else client.post
        assert call(url(theirs, action), {}, format="json").status_code == 404
    assert Conversation.objects.count() == 1


def test_a_message_of_another_conversation_is_refused(
    client: APIClient, source: Conversation, user: User
) -> None:
    other = create_conversation(owner=user, messages=[ChatMessage.user("x")])
    response = client.post(url(source, "fork"), {"message_id": message_id(other, 0)}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_message"


def test_edit_answers_the_new_text_in_a_fork(client: APIClient, source: Conversation) -> None:
    before = state(client, source)
    response = client.post(
        url(source, "edit"),
        {"message_id": message_id(source, 5), "message": "Cheers", "background": False},
        format="json",
    )
    assert response.status_code == 201, response.json()
    run = response.json()
    assert run["status"] == "completed"
    assert state(client, source) == before
    copy = Conversation.objects.get(pk=run["conversation"])
    assert copy.forked_from_id == source.pk
    assert [m.content for m in load_messages(copy)[5:]] == ["Cheers", "Cheers"]


def test_edit_refuses_an_answer(client: APIClient, source: Conversation) -> None:
    response = client.post(
        url(source, "edit"), {"message_id": message_id(source, 4), "message": "x"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "not_a_user_message"


def test_edit_names_a_bad_message_as_sent(client: APIClient, source: Conversation) -> None:
    response = client.post(
        url(source, "edit"), {"message_id": message_id(source, 5), "message": ""}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "message"
    assert Conversation.objects.count() == 1


def test_regenerate_with_another_provider_streams_the_new_answer(
    client: APIClient, source: Conversation, api_settings: dict[str, Any], settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {
        **api_settings,
        "PROVIDERS": {**api_settings["PROVIDERS"], "other": {"BACKEND": "echo", "MODEL": "e2"}},
    }
    before = state(client, source)
    response = client.post(
        url(source, "regenerate"),
        {"message_id": message_id(source, 4), "provider": "other", "stream": True},
        format="json",
    )
    assert response.status_code == 200
    events = parse_sse(b"".join(response.streaming_content))
    assert events[-1][0] == "run.completed"
    run = events[-1][1]["run"]
    assert (run["provider"], run["model"]) == ("other", "e2")
    assert state(client, source) == before
    copy = Conversation.objects.get(pk=run["conversation"])
    assert copy.forked_at_position == 0
    assert [(m.role, m.content) for m in load_messages(copy)] == [
        ("user", "Weather?"),
        ("assistant", "Weather?"),
    ]


def test_regenerate_refuses_a_user_turn(client: APIClient, source: Conversation) -> None:
    response = client.post(
        url(source, "regenerate"), {"message_id": message_id(source, 5)}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "not_an_assistant_message"


def test_a_source_with_an_active_run_can_be_edited(client: APIClient, source: Conversation) -> None:
    started = client.post(
        url(source, "runs"),
        {"message": calls_text(("d", "delete_file", {"path": "/tmp/x"}))},
        format="json",
    )
    assert started.json()["status"] == "requires_action"
    before = state(client, source)
    response = client.post(
        url(source, "edit"), {"message_id": message_id(source, 5), "message": "Hm"}, format="json"
    )
    assert response.status_code == 201
    assert state(client, source) == before
    # The waiting run's calls are not answered yet: a whole fork would cut them off.
    whole = client.post(url(source, "fork"), {}, format="json")
    assert whole.json()["error"]["code"] == "inside_tool_group"


def test_forks_lists_the_forks_in_a_bounded_number_of_queries(
    client: APIClient, source: Conversation, django_assert_num_queries: Any
) -> None:
    made = [client.post(url(source, "fork"), {}, format="json").json()["id"] for _ in range(3)]
    with django_assert_num_queries(3):  # the source, the count, the page
        response = client.get(url(source, "forks"))
    assert response.status_code == 200
    assert [item["id"] for item in response.json()["results"]] == made[::-1]
    assert {item["forked_from"] for item in response.json()["results"]} == {str(source.pk)}
    copy = Conversation.objects.get(pk=made[0])
    assert client.get(url(copy, "forks")).json()["results"] == []


@pytest.mark.parametrize(("query", "field"), [("page_size=abc", "page_size"), ("page=0", "page")])
def test_forks_refuses_malformed_paging_as_the_other_lists_do(
    client: APIClient, source: Conversation, query: str, field: str
) -> None:
    for path in (url(source, "forks"), "/api/conversations/"):
        response = client.get(f"{path}?{query}")
        error = response.json()["error"]
        assert (response.status_code, error["code"], error["field"]) == (400, "invalid", field)


def test_a_repeated_fork_with_the_same_key_makes_one_fork(
    client: APIClient, source: Conversation
) -> None:
    def post() -> Any:
        return client.post(url(source, "fork"), {}, format="json", HTTP_IDEMPOTENCY_KEY="f-1")

    first, second = post(), post()
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert Conversation.objects.filter(forked_from=source).count() == 1


def test_a_repeated_regenerate_with_the_same_key_starts_one_run(
    client: APIClient, source: Conversation
) -> None:
    body = {"message_id": message_id(source, 6), "background": False}

    def post() -> Any:
        return client.post(
            url(source, "regenerate"), body, format="json", HTTP_IDEMPOTENCY_KEY="r-1"
        )

    first, second = post(), post()
    assert first.json() == second.json()
    assert Run.objects.count() == 1
