"""LangChain's ``BaseChatMessageHistory`` over a conversation, with the real package:
a history as ``RunnableWithMessageHistory`` keeps it, a tool round trip, thinking
blocks, images, refusals, and the app's own turns read back as LangChain messages."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from llm_conversations.conversations import append_completion, create_conversation, load_messages
from llm_conversations.core.completions import CompletionResponse, Usage
from llm_conversations.core.messages import ChatMessage, InvalidMessage, ToolCall
from llm_conversations.core.reasoning import Reasoning, ReasoningKind
from llm_conversations.frameworks.langchain import ConversationChatMessageHistory
from llm_conversations.models import Conversation, Message
from llm_conversations.users import User
from tests.support.attachment_files import image_bytes
from tests.support.stored_conversations import assert_holds_together

pytestmark = pytest.mark.django_db


@pytest.fixture
def user() -> User:
    return get_user_model().objects.create_user("alice")


def without_ids(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [message.model_copy(update={"id": None}) for message in messages]


TOOL_ROUND_TRIP: list[BaseMessage] = [
    SystemMessage("Be brief."),
    HumanMessage("Weather in Paris?"),
    AIMessage(
        content=[
            {"type": "thinking", "thinking": "Look it up.", "signature": "sig-1"},
            {"type": "text", "text": "Checking."},
        ],
        tool_calls=[
            {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}
        ],
        response_metadata={"model_name": "claude-test"},
        usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
    ),
    ToolMessage("sunny", tool_call_id="call_1", status="success"),
    AIMessage("Sunny in Paris.", response_metadata={"model_name": "claude-test"}),
    HumanMessage("And a failing one?"),
    AIMessage(
        "", tool_calls=[{"name": "get_weather", "args": {}, "id": "call_2", "type": "tool_call"}]
    ),
    ToolMessage("no city given", tool_call_id="call_2", status="error"),
]


def test_a_tool_round_trip_is_typed_turns_and_reads_back_as_it_was(user: User) -> None:
    history = ConversationChatMessageHistory("support-42", owner=user)
    history.add_messages(TOOL_ROUND_TRIP[:4])
    history.add_messages(TOOL_ROUND_TRIP[4:])  # the results of a call stored before

    assert without_ids(history.messages) == TOOL_ROUND_TRIP
    conversation = Conversation.objects.get(owner=user, metadata__session_id="support-42")
    assert [m.id for m in history.messages] == [
        str(pk) for pk in conversation.messages.order_by("position").values_list("pk", flat=True)
    ]
    thinking = Reasoning("langchain", ReasoningKind.THINKING, "Look it up.", "sig-1")
    assert load_messages(conversation)[2] == ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_weather", {"city": "Paris"})], "Checking.", reasoning=[thinking]
    )
    assert load_messages(conversation)[7] == ChatMessage.tool_result(
        "call_2", "no city given", is_error=True
    )
    row = Message.objects.get(conversation=conversation, position=2)
    assert (row.model, row.input_tokens, row.output_tokens, row.total_tokens) == (
        "claude-test",
        12,
        7,
        19,
    )
    assert len(assert_holds_together(conversation.pk)) == 8


# LangChain 1 points to LangGraph's persistence instead; the history is the same.
@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_runnable_with_message_history_keeps_each_exchange(user: User) -> None:
    model = FakeMessagesListChatModel(responses=[AIMessage("Hello, Alice."), AIMessage("Alice.")])
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: ConversationChatMessageHistory(session_id, owner=user),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "chat-1"}}
    chain.invoke({"question": "I am Alice."}, config=config)
    async_to_sync(chain.ainvoke)({"question": "Who am I?"}, config=config)

    conversation = Conversation.objects.get(owner=user)
    assert [(m.role, m.content) for m in load_messages(conversation)] == [
        ("user", "I am Alice."),
        ("assistant", "Hello, Alice."),
        ("user", "Who am I?"),
        ("assistant", "Alice."),
    ]
    assert_holds_together(conversation.pk)


def test_the_apps_own_turns_read_as_langchain_messages(user: User) -> None:
    conversation = create_conversation(
        owner=user,
        messages=[ChatMessage.user("Weather?")],
    )
    append_completion(
        conversation,
        CompletionResponse(
            "",
            (ToolCall("c1", "get_weather", {"city": "Oslo"}),),
            usage=Usage(10, 5, cached_tokens=4),
            model="gpt-test",
            provider="openai",
        ),
    )
    from llm_conversations.conversations import append_messages

    append_messages(conversation, [ChatMessage.tool_result("c1", "snow")])
    read = ConversationChatMessageHistory.of(conversation).messages
    assert without_ids(read) == [
        HumanMessage("Weather?"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "get_weather", "args": {"city": "Oslo"}, "id": "c1", "type": "tool_call"}
            ],
            response_metadata={"model_name": "gpt-test"},
            usage_metadata={
                "input_tokens": 10,
                "output_tokens": 5,
                "total_tokens": 15,
                "input_token_details": {"cache_read": 4},
            },
        ),
        ToolMessage("snow", tool_call_id="c1", status="success"),
    ]


def test_an_image_given_as_a_data_url_is_stored_as_an_attachment(user: User) -> None:
    url = "data:image/png;base64," + base64.b64encode(image_bytes()).decode()
    history = ConversationChatMessageHistory("s", owner=user)
    sent = HumanMessage(
        [{"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": {"url": url}}]
    )
    history.add_messages([sent])
    (stored,) = load_messages(history.conversation.find())
    assert stored.parts is not None
    assert stored.parts[1].attachment_id is not None  # type: ignore[union-attr]
    assert without_ids(history.messages) == [sent]


@pytest.mark.parametrize(
    ("messages", "code"),
    [
        (
            [HumanMessage([{"type": "image_url", "image_url": {"url": "https://x/y.png"}}])],
            "content_not_imported",
        ),
        ([ToolMessage("x", tool_call_id="c", artifact={"raw": 1})], "artifact_not_imported"),
        (
            [
                AIMessage(
                    "", tool_calls=[{"name": "f", "args": {}, "id": "c", "type": "tool_call"}]
                ),
                HumanMessage("Hi"),
            ],
            "missing_tool_result",
        ),
        ([HumanMessage("Hi"), ToolMessage("x", tool_call_id="nowhere")], "unexpected_tool_result"),
    ],
)
def test_what_no_turn_keeps_is_refused_and_nothing_is_stored(
    user: User, messages: list[BaseMessage], code: str
) -> None:
    history = ConversationChatMessageHistory("s", owner=user)
    with pytest.raises(InvalidMessage) as info:
        history.add_messages(messages)
    assert info.value.code == code
    assert not Conversation.objects.exists()


def test_clear_moves_it_to_the_trash_and_reading_is_two_queries(user: User) -> None:
    history = ConversationChatMessageHistory("s", owner=user)
    history.add_messages(TOOL_ROUND_TRIP)
    with CaptureQueriesContext(connection) as queries:
        history.messages  # noqa: B018 - the read is what is measured
    assert len(queries) == 2  # the session's conversation, its messages
    first = history.conversation.find()
    async_to_sync(history.aclear)()
    assert Conversation.objects.get(pk=first).trashed_at is not None
    assert async_to_sync(history.aget_messages)() == []
    async_to_sync(history.aadd_messages)([HumanMessage("Again.")])
    assert history.conversation.find() != first
    assert without_ids(history.messages) == [HumanMessage("Again.")]


def test_a_message_while_stored_calls_wait_is_refused_by_the_store(user: User) -> None:
    history = ConversationChatMessageHistory("s", owner=user)
    calling = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1", "type": "tool_call"}])
    history.add_messages([HumanMessage("Go."), calling])
    with pytest.raises(InvalidMessage) as info:
        history.add_messages([HumanMessage("Hello?")])
    assert info.value.code == "unanswered_tool_calls"
    assert len(history.messages) == 2
