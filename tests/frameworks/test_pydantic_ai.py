"""pydantic-ai history on this app's tables, with the real package: an agent with a tool
and thinking (``FunctionModel``), ``TestModel``, retries; the round trip through
``ModelMessagesTypeAdapter`` is exact, the turns are typed and hold together."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.messages import ChatMessage, InvalidMessage, ToolCall
from llm_conversations.core.reasoning import Reasoning, ReasoningKind
from llm_conversations.frameworks.pydantic_ai import (
    aload_model_messages,
    load_model_messages,
    store_model_messages,
)
from llm_conversations.models import Message
from llm_conversations.providers.anthropic_thinking import thinking_blocks
from tests.support.stored_conversations import assert_holds_together

pytestmark = pytest.mark.django_db


def dumped(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """Messages as ``ModelMessagesTypeAdapter`` writes them (JSON values)."""
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def thinking_model(seen: list[list[ModelMessage]]) -> FunctionModel:
    """Thinks (signed, as Anthropic does) and calls the tool, then thinks and answers;
    each call's history is kept in ``seen``."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if isinstance(messages[-1], ModelRequest) and isinstance(
            messages[-1].parts[-1], UserPromptPart
        ):
            return ModelResponse(
                parts=[
                    ThinkingPart(
                        "The user wants weather.", signature="sig-1", provider_name="anthropic"
                    ),
                    ThinkingPart(
                        "", id="redacted_thinking", signature="REDACTED", provider_name="anthropic"
                    ),
                    TextPart("Let me look."),
                    ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="call_1"),
                ],
                model_name="claude-test",
                provider_name="anthropic",
                finish_reason="tool_call",
            )
        return ModelResponse(
            parts=[
                ThinkingPart("It answered.", signature="sig-2", provider_name="anthropic"),
                TextPart("Sunny, "),
                TextPart("18 degrees."),
            ],
            model_name="claude-test",
            provider_name="anthropic",
            finish_reason="stop",
        )

    return FunctionModel(respond)


def weather_agent(seen: list[list[ModelMessage]]) -> Agent[None, str]:
    agent = Agent(thinking_model(seen), instructions="Be brief.", system_prompt="You know weather.")

    @agent.tool_plain
    def get_weather(city: str) -> dict[str, Any]:
        return {"city": city, "sky": "sunny", "degrees": 18}

    return agent


def test_an_agent_with_a_tool_and_thinking_round_trips_exactly_over_two_runs() -> None:
    conversation = create_conversation(title="weather")
    seen: list[list[ModelMessage]] = []
    agent = weather_agent(seen)

    first = agent.run_sync("Weather in Paris?")
    store_model_messages(conversation, first.new_messages())
    assert dumped(load_model_messages(conversation)) == dumped(first.all_messages())

    second = agent.run_sync("And tomorrow?", message_history=load_model_messages(conversation))
    # The model was sent the first run exactly as pydantic-ai made it.
    assert dumped(seen[2][:4]) == dumped(first.all_messages())
    store_model_messages(conversation, second.new_messages())
    assert dumped(load_model_messages(conversation)) == dumped(second.all_messages())

    thinking = Reasoning("anthropic", ReasoningKind.THINKING, "The user wants weather.", "sig-1")
    redacted = Reasoning("anthropic", ReasoningKind.REDACTED, data="REDACTED")
    answer = ChatMessage.assistant(
        "Sunny, 18 degrees.",
        reasoning=[Reasoning("anthropic", ReasoningKind.THINKING, "It answered.", "sig-2")],
    )
    call = ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_weather", {"city": "Paris"})],
        "Let me look.",
        reasoning=[thinking, redacted],
    )
    result = ChatMessage.tool_result("call_1", '{"city":"Paris","sky":"sunny","degrees":18}')
    turns = [
        ChatMessage.system("You know weather."),
        ChatMessage.user("Weather in Paris?"),
        *(call, result, answer),
        ChatMessage.user("And tomorrow?"),
        *(call, result, answer),
    ]
    assert load_messages(conversation) == turns
    assert assert_holds_together(conversation.pk) == turns
    # Anthropic's thinking is kept as the app's Anthropic adapter sends it back.
    assert thinking_blocks(turns[2].reasoning) == [
        {"type": "thinking", "thinking": "The user wants weather.", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "REDACTED"},
    ]
    # The reply's model, provider, usage and finish reason are the row's columns.
    reply = first.all_messages()[1]
    assert isinstance(reply, ModelResponse)
    call_row = Message.objects.get(conversation=conversation, position=2)
    assert (call_row.provider, call_row.model, call_row.finish_reason) == (
        "anthropic",
        reply.model_name,
        "tool_calls",
    )
    assert (call_row.input_tokens, call_row.output_tokens) == (
        reply.usage.input_tokens,
        reply.usage.output_tokens,
    )


def test_retries_text_arguments_and_the_test_model_round_trip_exactly() -> None:
    conversation = create_conversation()
    agent = Agent(TestModel())
    tries: list[int] = []

    @agent.tool_plain
    def ping(times: int) -> str:
        tries.append(times)
        if len(tries) == 1:
            raise ModelRetry("Not yet, try again.")
        return "pong"

    result = agent.run_sync("Ping?")
    history = [
        *result.all_messages(),
        ModelResponse(parts=[ToolCallPart("ping", '{"times":  2}', tool_call_id="text-args")]),
    ]
    store_model_messages(conversation, history)
    assert dumped(load_model_messages(conversation)) == dumped(history)
    stored = load_messages(conversation)
    retried = next(m for m in stored if m.role == "tool")
    assert retried.is_error
    assert retried.content == "Not yet, try again."
    assert stored[-1].tool_calls == (ToolCall("text-args", "ping", {"times": 2}),)


def test_turns_this_app_made_load_as_plain_parts_and_an_agent_goes_on_from_them() -> None:
    conversation = create_conversation(
        messages=[
            ChatMessage.system("Be brief."),
            ChatMessage.user("Weather?"),
            ChatMessage.assistant_tool_calls(
                [ToolCall("c1", "get_weather", {"city": "Oslo"})],
                reasoning=[Reasoning("anthropic", ReasoningKind.THINKING, "Look it up.", "sig")],
            ),
            ChatMessage.tool_result("c1", "snow", is_error=True),
            ChatMessage.assistant("Snow, probably."),
        ]
    )
    loaded = load_model_messages(conversation)
    assert [m.kind for m in loaded] == ["request", "response", "request", "response"]
    assert [p.part_kind for p in loaded[0].parts] == ["system-prompt", "user-prompt"]
    assert loaded[1].parts[0] == ThinkingPart(
        "Look it up.", signature="sig", provider_name="anthropic"
    )
    assert loaded[1].parts[1] == ToolCallPart("get_weather", {"city": "Oslo"}, tool_call_id="c1")
    tool_return = loaded[2].parts[0]
    assert (tool_return.tool_name, tool_return.content, tool_return.outcome) == (  # type: ignore[union-attr]
        "get_weather",
        "snow",
        "failed",
    )

    result = Agent(TestModel(custom_output_text="Still snow.")).run_sync(
        "And now?", message_history=loaded
    )
    store_model_messages(conversation, result.new_messages())
    assert [m.content for m in load_messages(conversation)][-2:] == ["And now?", "Still snow."]
    assert len(assert_holds_together(conversation.pk)) == 7


def test_a_part_no_turn_holds_is_refused_and_nothing_is_stored() -> None:
    conversation = create_conversation()
    request = ModelRequest(parts=[UserPromptPart(["Look:", ImageUrl("https://example.com/a.png")])])
    with pytest.raises(InvalidMessage) as info:
        store_model_messages(conversation, [request])
    assert (info.value.code, info.value.field) == (
        "unsupported_content",
        "messages[0].parts[0].content",
    )
    assert not Message.objects.exists()


def test_loading_is_one_query_and_async_loads_the_same() -> None:
    conversation = create_conversation()
    result = weather_agent([]).run_sync("Weather in Paris?")
    store_model_messages(conversation, result.new_messages())
    with CaptureQueriesContext(connection) as queries:
        load_model_messages(conversation)
    assert len(queries) == 1
    from asgiref.sync import async_to_sync

    assert dumped(async_to_sync(aload_model_messages)(conversation)) == dumped(
        result.all_messages()
    )
