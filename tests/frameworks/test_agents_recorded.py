"""Real Responses API exchanges (recorded by pydantic-ai; shared/recorded, sources in
tests/providers/recorded/SOURCES.md) served to an Agents SDK agent on 127.0.0.1.

Over two runs: the first is the recording (a call, its output, the answer), kept
by a :class:`ConversationSession`; what the session then gives back is what the
recording's second request sent (the reasoning item verbatim, the call with its
id only after reasoning), the stored reasoning is what the app's own adapter reads
from the same reply, and the second run sends the whole of it again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, FunctionTool, ModelSettings, Runner
from agents.models.openai_responses import OpenAIResponsesModel
from asgiref.sync import async_to_sync
from openai import AsyncOpenAI

from llm_conversations.conversations import load_messages
from llm_conversations.core.messages import ChatMessage
from llm_conversations.frameworks.agents import ConversationSession
from tests.providers.test_recorded_responses import Replay, texts, tools_of
from tests.support.responses_server import message, response, serving
from tests.support.stored_conversations import assert_holds_together

pytestmark = pytest.mark.django_db

CASSETTES = [
    "test_openai_responses_thinking_with_tool_calls",
    "test_openai_responses_model_simple_response_with_tool_call",
]


def recorded_tool(request: dict[str, Any], output: str) -> FunctionTool:
    """The recording's tool, answering what its second request sent back."""
    (spec,) = request["tools"]

    async def invoke(context: Any, arguments: str) -> str:
        return output

    return FunctionTool(
        name=spec["name"],
        description=spec.get("description") or "",
        params_json_schema=spec["parameters"],
        on_invoke_tool=invoke,
        strict_json_schema=bool(spec.get("strict")),
    )


def comparable(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as compared: a call's ``status`` (output only) left out, its arguments decoded."""
    kept = []
    for item in items:
        if item.get("type") == "function_call":
            item = {k: v for k, v in item.items() if k != "status"}
            item["arguments"] = json.loads(item["arguments"])
        kept.append(item)
    return kept


@pytest.mark.parametrize("name", CASSETTES)
def test_a_recorded_tool_round_trip_is_kept_and_sent_again_as_recorded(name: str) -> None:
    replay = Replay(name)
    first, second = replay.request(0), replay.request(1)
    (output,) = [i["output"] for i in second["input"] if i.get("type") == "function_call_output"]
    (question,) = [i["content"] for i in first["input"] if i.get("role") == "user"]
    bodies = [replay.recorded(0), replay.recorded(1), response(message("Anything else?"))]

    with serving(bodies) as fake:
        agent = Agent(
            name="recorded",
            instructions=first.get("instructions"),
            tools=[recorded_tool(first, output)],
            model=OpenAIResponsesModel(
                first["model"], AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
            ),
            model_settings=ModelSettings(
                store=False, response_include=["reasoning.encrypted_content"]
            ),
        )
        session = ConversationSession("recorded")
        async_to_sync(Runner.run)(agent, question, session=session)
        held = session.get_items_sync()
        async_to_sync(Runner.run)(agent, "Thanks.", session=session)

    # What the session gives back is what the recording's second request sent.
    assert comparable(held[: len(second["input"])]) == comparable(second["input"])
    # The stored reasoning is what the app's adapter reads from the same reply.
    turns = load_messages(session.conversation.find())
    call_turn = next(t for t in turns if t.tool_calls)
    read = replay.provider().complete([ChatMessage.user(question)], tools=tools_of(first))
    assert call_turn.tool_calls == read.tool_calls
    assert call_turn.reasoning == (read.reasoning or None)
    assert turns[3] == ChatMessage.assistant(texts(replay.recorded(1)))
    # The second run sent all of it again, then its new turn.
    assert fake.requests[2]["input"] == [*held, {"role": "user", "content": "Thanks."}]
    assert len(assert_holds_together(session.conversation.find())) == 6
