"""A thinking + tools loop through real adapters: the reasoning each round returns
is stored with its turn and sent back on the next round where the provider wants it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.conversations.forks import fork_conversation
from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind, Role
from llm_conversations.models import Message
from llm_conversations.providers import AnthropicProvider, GeminiProvider, OpenAIResponsesProvider
from llm_conversations.runs import ToolLoopService
from tests.support import loop_tools

pytestmark = pytest.mark.django_db

THINKING = {"type": "enabled", "budget_tokens": 1024}


def anthropic_reply(rounds: int) -> dict[str, Any]:
    if rounds == 0:
        content = [
            {"type": "thinking", "thinking": "I need the time.", "signature": "SIG-1"},
            {"type": "redacted_thinking", "data": "RED-1"},
            {"type": "tool_use", "id": "toolu_a", "name": "get_time", "input": {}},
        ]
        return {"model": "claude", "content": content, "stop_reason": "tool_use", "usage": {}}
    content = [
        {"type": "thinking", "thinking": "Now answer.", "signature": "SIG-2"},
        {"type": "text", "text": "It is 09:00."},
    ]
    return {"model": "claude", "content": content, "stop_reason": "end_turn", "usage": {}}


def service(
    cls: type, model: str, reply: Any, bodies: list[dict[str, Any]], **options: Any
) -> ToolLoopService:
    def transport(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        return httpx.Response(200, json=reply(len(bodies) - 1))

    provider = cls(
        model=model,
        api_key="k",
        http_client=httpx.Client(transport=httpx.MockTransport(transport)),
        streams=False,  # the transport answers whole replies
        **options,
    )
    return ToolLoopService(provider, tools=loop_tools.registry())


def test_anthropic_thinking_and_tools_loop_stores_and_replays_the_thinking() -> None:
    bodies: list[dict[str, Any]] = []
    conversation = create_conversation()
    run = service(AnthropicProvider, "claude", anthropic_reply, bodies, thinking=THINKING).send(
        conversation, {"role": "user", "content": "Time?"}
    )
    assert (run.status, run.iterations) == ("completed", 2)
    history = load_messages(conversation)
    assert [m.role for m in history] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert history[1].reasoning == (
        Reasoning("anthropic", ReasoningKind.THINKING, "I need the time.", "SIG-1"),
        Reasoning("anthropic", ReasoningKind.REDACTED, data="RED-1"),
    )
    assert history[3].reasoning == (
        Reasoning("anthropic", ReasoningKind.THINKING, "Now answer.", "SIG-2"),
    )
    assert history[3].content == "It is 09:00."
    # The second request's assistant turn starts with the first round's blocks, verbatim.
    assert bodies[1]["messages"][1]["content"][:2] == [
        {"type": "thinking", "thinking": "I need the time.", "signature": "SIG-1"},
        {"type": "redacted_thinking", "data": "RED-1"},
    ]
    assert bodies[1]["messages"][1]["content"][2]["type"] == "tool_use"
    assert Message.objects.filter(reasoning__isnull=False).count() == 2


def test_a_gemini_loop_sends_the_signature_of_its_own_call_and_no_dummy() -> None:
    def reply(rounds: int) -> dict[str, Any]:
        if rounds == 0:
            parts = [{"functionCall": {"name": "get_time", "args": {}}, "thoughtSignature": "GSIG"}]
        else:
            parts = [{"text": "09:00."}]
        return {"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]}

    bodies: list[dict[str, Any]] = []
    conversation = create_conversation()
    run = service(GeminiProvider, "gemini-3-flash", reply, bodies).send(
        conversation, {"role": "user", "content": "Time?"}
    )
    assert run.status == "completed"
    (part,) = bodies[1]["contents"][1]["parts"]
    assert part == {"functionCall": {"name": "get_time", "args": {}}, "thoughtSignature": "GSIG"}


def test_a_fork_keeps_the_reasoning_of_the_turns_it_copies() -> None:
    reasoning = [Reasoning("anthropic", ReasoningKind.THINKING, "Hm.", "SIG")]
    source = create_conversation(
        messages=[ChatMessage.user("q"), ChatMessage.assistant("a", reasoning=reasoning)]
    )
    copy = fork_conversation(source, 2)
    assert load_messages(copy)[1].reasoning == tuple(reasoning)


def responses_reply(rounds: int) -> dict[str, Any]:
    usage = {
        "input_tokens": 9,
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 4},
    }
    reasoning = {"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC", "summary": []}
    if rounds == 0:
        call = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_a",
            "name": "get_time",
            "arguments": "{}",
            "status": "completed",
        }
        output: list[Any] = [{**reasoning, "status": "completed"}, call]
    else:
        part = {"type": "output_text", "text": "It is 09:00.", "annotations": []}
        output = [{"type": "message", "id": "msg_2", "role": "assistant", "content": [part]}]
    return {"model": "gpt-5", "status": "completed", "output": output, "usage": usage}


def test_a_responses_loop_stores_the_reasoning_item_and_sends_it_back_before_its_call() -> None:
    bodies: list[dict[str, Any]] = []
    conversation = create_conversation()
    run = service(OpenAIResponsesProvider, "gpt-5", responses_reply, bodies).send(
        conversation, {"role": "user", "content": "Time?"}
    )
    assert (run.status, run.iterations) == ("completed", 2)
    history = load_messages(conversation)
    assert [part.kind for part in history[1].reasoning or ()] == [
        ReasoningKind.ENCRYPTED,
        ReasoningKind.SIGNATURE,
    ]
    second = bodies[1]
    assert (second["store"], second["include"]) == (False, ["reasoning.encrypted_content"])
    assert second["input"][1:] == [
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC", "summary": []},
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "get_time",
            "arguments": "{}",
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "call_a", "output": history[2].content},
    ]
    assert history[3].content == "It is 09:00."
