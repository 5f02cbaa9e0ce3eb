"""The OpenAI Agents SDK on this app's tables: ``Runner.run`` with a tool, over two runs,
against a fake Responses server on 127.0.0.1, then the same conversation in the
admin, the API, a share and an export, and continued by the app's own loop and back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from agents import Agent, ModelSettings, Runner, RunResult, function_tool
from agents.memory import Session
from agents.models.openai_responses import OpenAIResponsesModel
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from openai import AsyncOpenAI
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.conversations.shares import create_share, snapshot_messages
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.core.reasoning import Reasoning, ReasoningKind
from llm_conversations.frameworks.agents import ConversationSession
from llm_conversations.models import Conversation, Message
from llm_conversations.providers.openai_responses_items import to_responses_input
from llm_conversations.runs import ToolLoopService
from llm_conversations.users import User
from tests.support.responses_server import (
    ResponsesServer,
    function_call,
    message,
    reasoning,
    response,
    serving,
)
from tests.support.stored_conversations import assert_holds_together

pytestmark = pytest.mark.django_db

ENCRYPTED = "gAAAA-opaque-reasoning"


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def weather_replies() -> list[dict[str, Any]]:
    """Run one: reasoning and a call, then the answer; run two: an answer."""
    return [
        response(
            reasoning("Looking it up.", ENCRYPTED),
            function_call("call_1", "get_weather", '{"city": "Paris"}'),
        ),
        response(message("It is sunny in Paris.", "msg_1")),
        response(message("Tomorrow too.", "msg_2")),
    ]


def agent_for(fake: ResponsesServer) -> Agent[Any]:
    client = AsyncOpenAI(base_url=fake.base_url, api_key="test-key", max_retries=0)
    return Agent(
        name="weather",
        instructions="Be brief.",
        tools=[get_weather],
        model=OpenAIResponsesModel("gpt-5-mini", client),
        # Stateless, with the reasoning carried in the items, as the app's adapter asks.
        model_settings=ModelSettings(store=False, response_include=["reasoning.encrypted_content"]),
    )


def run(agent: Agent[Any], text: str, session: ConversationSession) -> RunResult:
    return async_to_sync(Runner.run)(agent, text, session=session)


@pytest.fixture
def user() -> User:
    return get_user_model().objects.create_user("alice")


@pytest.fixture
def fake() -> Iterator[ResponsesServer]:
    with serving(weather_replies()) as server:
        yield server


REASONING = (
    Reasoning("openai_responses", ReasoningKind.SUMMARY, "Looking it up."),
    Reasoning(
        "openai_responses",
        ReasoningKind.ENCRYPTED,
        data=json.dumps(
            {
                "id": "rs_1",
                "encrypted_content": ENCRYPTED,
                # As the SDK gives it back (the order of its model's fields).
                "summary": [{"text": "Looking it up.", "type": "summary_text"}],
            }
        ),
    ),
    Reasoning("openai_responses", ReasoningKind.SIGNATURE, data="fc_1", call_id="call_1"),
)
TURNS = [
    ChatMessage.user("Weather in Paris?"),
    ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_weather", {"city": "Paris"})], reasoning=REASONING
    ),
    ChatMessage.tool_result("call_1", "sunny in Paris"),
    ChatMessage.assistant("It is sunny in Paris."),
    ChatMessage.user("And tomorrow?"),
    ChatMessage.assistant("Tomorrow too."),
]


def test_two_runs_with_a_tool_are_typed_turns_that_hold_together(
    fake: ResponsesServer, user: User
) -> None:
    session = ConversationSession("support-42", owner=user, title="Weather")
    agent = agent_for(fake)

    assert run(agent, "Weather in Paris?", session).final_output == "It is sunny in Paris."
    assert run(agent, "And tomorrow?", session).final_output == "Tomorrow too."

    conversation = Conversation.objects.get(owner=user)
    assert conversation.title == "Weather"
    assert conversation.metadata == {"session_id": "support-42"}
    assert load_messages(conversation) == TURNS
    assert assert_holds_together(conversation.pk) == TURNS
    # The second run sent the first as the session gave it back: the reasoning item
    # verbatim, the call with the id it came with, its output, the answer.
    assert fake.requests[2]["input"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "encrypted_content": ENCRYPTED,
            "summary": [{"type": "summary_text", "text": "Looking it up."}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny in Paris"},
        {"role": "assistant", "content": "It is sunny in Paris."},
        {"role": "user", "content": "And tomorrow?"},
    ]


def test_the_conversation_shows_in_the_api_the_admin_a_share_and_an_export(
    fake: ResponsesServer, user: User
) -> None:
    session = ConversationSession("support-42", owner=user)
    run(agent_for(fake), "Weather in Paris?", session)
    conversation = Conversation.objects.get(owner=user)

    api = APIClient()
    api.force_authenticate(user)
    listed = api.get(f"/api/conversations/{conversation.pk}/messages/", {"order": "asc"})
    assert listed.status_code == 200, listed.content
    shown = listed.json()["data"]
    assert [m["role"] for m in shown] == ["user", "assistant", "tool", "assistant"]
    assert shown[1]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    assert shown[2]["tool_call_id"] == "call_1"

    staff = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw")
    admin = Client()
    admin.force_login(staff)
    page = admin.get(reverse("admin:llm_conversations_conversation_change", args=[conversation.pk]))
    assert page.status_code == 200
    assert b"get_weather" in page.content
    assert b"Looking it up." in page.content

    share = create_share(conversation)
    assert [m.content for m in snapshot_messages(share.link)] == [
        "Weather in Paris?",
        "",
        "sunny in Paris",
        "It is sunny in Paris.",
    ]
    assert_holds_together(conversation.pk)


def test_the_apps_own_loop_continues_it_and_the_agent_goes_on_after(
    settings: Any, user: User
) -> None:
    replies = [*weather_replies()[:2], response(message("Rain later.", "msg_app"))]
    with serving(replies) as fake:
        session = ConversationSession("support-42", owner=user)
        run(agent_for(fake), "Weather in Paris?", session)
        conversation = Conversation.objects.get(owner=user)
        held = session.get_items_sync()
        settings.LLM_CONVERSATIONS = {
            "DEFAULT_PROVIDER": "responses",
            "PROVIDERS": {
                "responses": {
                    "BACKEND": "openai_responses",
                    "MODEL": "gpt-5-mini",
                    "API_KEY": "test-key",
                    "BASE_URL": fake.base_url,
                    "STREAM": False,
                }
            },
        }
        ran = ToolLoopService().send(conversation, "Any rain?")
        assert ran.status == "completed"
        # The app's adapter sent the agent's turns as the session gives them to the
        # agent: the reasoning item verbatim, the call with its id, its output.
        assert fake.requests[2]["input"] == [*held, {"role": "user", "content": "Any rain?"}]
        assert held[1]["encrypted_content"] == ENCRYPTED

    with serving([response(message("Tomorrow too.", "msg_2"))]) as fake:
        run(agent_for(fake), "And tomorrow?", session)
        sent = fake.requests[0]["input"]
    assert sent[-3:] == [
        {"role": "user", "content": "Any rain?"},
        {"role": "assistant", "content": "Rain later."},
        {"role": "user", "content": "And tomorrow?"},
    ]
    answered = Message.objects.get(conversation=conversation, content="Rain later.")
    assert (answered.provider, answered.model) == ("openai_responses", "gpt-5-mini")
    assert len(assert_holds_together(conversation.pk)) == 8


def test_pop_item_takes_back_one_item_and_add_items_puts_it_back(
    fake: ResponsesServer, user: User
) -> None:
    session = ConversationSession("s", owner=user)
    run(agent_for(fake), "Weather in Paris?", session)
    everything = session.get_items_sync()
    assert len(everything) == 5

    # The answer, then the result: each was a turn of its own, removed.
    assert session.pop_item_sync() == everything[4]
    assert session.pop_item_sync() == everything[3]
    # The call: its turn keeps its reasoning, less the call and its id.
    assert session.pop_item_sync() == everything[2]
    (turn,) = Message.objects.filter(role="assistant")
    assert turn.tool_calls is None
    assert [part["kind"] for part in turn.reasoning] == ["summary", "encrypted"]
    assert session.get_items_sync() == everything[:2]
    assert_holds_together(turn.conversation_id)

    # Put back, the call goes on its turn again with its id: the items are as they were.
    session.add_items_sync(everything[2:])
    assert session.get_items_sync() == everything
    assert load_messages(turn.conversation_id) == TURNS[:4]
    assert session.pop_item_sync() == everything[4]
    for _ in range(4):
        assert session.pop_item_sync() is not None
    assert session.pop_item_sync() is None
    assert Message.objects.count() == 0


def test_clearing_moves_the_conversation_to_the_trash_and_starts_afresh(
    fake: ResponsesServer, user: User
) -> None:
    session = ConversationSession("s", owner=user)
    run(agent_for(fake), "Weather in Paris?", session)
    first = Conversation.objects.get(owner=user)

    async_to_sync(session.clear_session)()

    first.refresh_from_db()
    assert first.trashed_at is not None
    assert first.message_count == 4  # every turn kept, restorable
    assert async_to_sync(session.get_items)() == []
    run(agent_for(fake), "And tomorrow?", session)
    second = Conversation.objects.get(owner=user, trashed_at__isnull=True)
    assert second.pk != first.pk
    assert second.metadata == {"session_id": "s"}
    assert load_messages(second) == [
        ChatMessage.user("And tomorrow?"),
        ChatMessage.assistant("Tomorrow too."),
    ]


def test_the_session_is_one_of_the_sdks_protocol() -> None:
    assert isinstance(ConversationSession("s"), Session)


def test_a_session_id_names_a_conversation_of_its_owner_only(user: User) -> None:
    other = get_user_model().objects.create_user("mallory")
    made = create_conversation(owner=user, messages=[ChatMessage.user("Hello")])
    items = [{"role": "user", "content": "Hello"}]

    assert ConversationSession.of(made).get_items_sync() == items
    assert ConversationSession(str(made.pk), owner=user).get_items_sync() == items
    # Another owner naming it gets a session of their own.
    assert ConversationSession(str(made.pk), owner=other).get_items_sync() == []
    ConversationSession("shared-name", owner=user).add_items_sync(items)
    ConversationSession("shared-name", owner=other).add_items_sync(items)
    assert Conversation.objects.filter(metadata__session_id="shared-name").count() == 2
    with pytest.raises(ValueError, match="session id"):
        ConversationSession("", owner=user)


@pytest.mark.parametrize(
    ("item", "code", "field"),
    [
        (
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            "unsupported_item",
            "items[1]",
        ),
        (
            {"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]},
            "unsupported_content",
            "items[1].content[0]",
        ),
        (
            {"type": "function_call_output", "call_id": "nowhere", "output": "x"},
            "unexpected_tool_result",
            "messages[1].tool_call_id",
        ),
    ],
)
def test_an_item_no_turn_holds_is_refused_and_nothing_is_stored(
    user: User, item: dict[str, Any], code: str, field: str
) -> None:
    session = ConversationSession("s", owner=user)
    with pytest.raises(Exception) as info:  # noqa: PT011 - the code is checked
        session.add_items_sync([{"role": "user", "content": "Hi"}, item])
    assert (getattr(info.value, "code", None), getattr(info.value, "field", None)) == (code, field)
    assert not Conversation.objects.exists()


def test_items_read_and_written_in_queries_that_do_not_grow_with_the_history(user: User) -> None:
    session = ConversationSession("s", owner=user)
    exchange = [
        {"role": "user", "content": "Weather?"},
        function_call("call_x", "get_weather", '{"city": "Oslo"}'),
        {"type": "function_call_output", "call_id": "call_x", "output": "snow"},
        message("Snow."),
    ]

    def counts() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as reads:
            session.get_items_sync()
        with CaptureQueriesContext(connection) as writes:
            session.add_items_sync(exchange)
        return len(reads), len(writes)

    session.add_items_sync(exchange)
    first = counts()
    for _ in range(10):
        counts()
    assert counts() == first
    assert first[0] == 2  # the session's conversation, its messages


def test_get_items_gives_the_latest_items_within_a_limit(fake: ResponsesServer, user: User) -> None:
    session = ConversationSession("s", owner=user)
    run(agent_for(fake), "Weather in Paris?", session)
    everything = session.get_items_sync()
    assert async_to_sync(session.get_items)(2) == everything[-2:]
    assert session.get_items_sync(0) == []
    limited = ConversationSession("s", owner=user, session_settings=None)
    limited.session_settings.limit = 1
    assert limited.get_items_sync() == everything[-1:]


def test_reasoning_of_another_provider_goes_back_to_the_agent_only(user: User) -> None:
    """An agent on another model (LiteLLM's Claude, say): its reasoning items come back
    to the agent, tagged with that provider, and the app's Responses adapter never
    sends them."""
    thought = {
        "type": "reasoning",
        "id": "rs_x",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "Think."}],
        "encrypted_content": "signature-of-claude",
    }
    items = [
        {"role": "user", "content": "Weather?"},
        thought,
        function_call("call_1", "get_weather", '{"city":"Oslo"}'),
        {"type": "function_call_output", "call_id": "call_1", "output": "snow"},
    ]
    session = ConversationSession("s", owner=user, reasoning_provider="litellm/anthropic")
    session.add_items_sync(items)

    assert session.get_items_sync()[1] == thought
    stored = load_messages(session.conversation.find())
    assert {part.provider for part in stored[1].reasoning or ()} == {"litellm/anthropic"}
    _, sent = to_responses_input(stored)
    assert [item.get("type") for item in sent] == [None, "function_call", "function_call_output"]
    assert "id" not in sent[1]


def test_items_after_an_empty_reply_of_the_apps_loop_follow_it(user: User) -> None:
    made = create_conversation(
        owner=user, messages=[ChatMessage.user("Hi"), ChatMessage.assistant("")]
    )
    session = ConversationSession.of(made)
    session.add_items_sync([{"role": "user", "content": "Hello?"}, message("Hello.")])
    assert load_messages(made) == [
        ChatMessage.user("Hi"),
        ChatMessage.assistant(""),
        ChatMessage.user("Hello?"),
        ChatMessage.assistant("Hello."),
    ]
