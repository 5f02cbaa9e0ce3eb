"""Prompt caching at the HTTP boundary: breakpoints, cache keys, and request bytes
that extend the previous round's (docs/providers.md, "Prompt caching")."""

import itertools
import json
from typing import Any

import httpx
import pytest

from llm_conversations.core.messages import ChatMessage
from llm_conversations.providers import AnthropicProvider, OpenAIProvider
from llm_conversations.providers.caching import place_breakpoints, prefix_key
from llm_conversations.providers.openai_responses import OpenAIResponsesProvider

from .conftest import TOOLS, Recorder

MARK = b',"cache_control":{"type":"ephemeral"}'
EPHEMERAL = {"type": "ephemeral"}
START = [ChatMessage.system("You are terse."), ChatMessage.user("Weather in Paris?")]
ROUNDS = 5


def anthropic_reply(i: int) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "thinking", "thinking": f"Step {i}.", "signature": f"sig-{i}=="},
                {"type": "text", "text": f"Looking ({i})."},
                {"type": "tool_use", "id": f"toolu_{i}", "name": "get_weather", "input": {}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
    )


def openai_reply(i: int) -> httpx.Response:
    call = {"id": f"call_{i}", "type": "function"}
    call["function"] = {"name": "get_weather", "arguments": "{}"}  # type: ignore[assignment]
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    return httpx.Response(200, json={"model": "gpt-5", "choices": [choice]})


def responses_reply(i: int) -> httpx.Response:
    item = {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}"}
    item.update(name="get_weather", arguments="{}", status="completed")
    body = {"id": f"resp_{i}", "status": "completed", "model": "gpt-5", "output": [item]}
    return httpx.Response(200, json=body)


def converse(cls: type, reply: Any, **options: Any) -> list[bytes]:
    """The request bytes of a tool loop of ROUNDS rounds."""
    recorder = Recorder(*(reply(i) for i in range(ROUNDS)))
    provider = cls(
        http_client=httpx.Client(transport=httpx.MockTransport(recorder)),
        api_key="k",
        max_retries=0,
        model="m",
        **options,
    )
    history = list(START)
    for i in range(ROUNDS):
        response = provider.complete(history, tools=TOOLS)
        (call,) = response.tool_calls
        history += [response.to_message(), ChatMessage.tool_result(call.id, f"{i}C")]
    return [request.content for request in recorder.requests]


def assert_extends(previous: bytes, current: bytes, moving: bool) -> None:
    """``current`` is ``previous`` (less its rolling breakpoint) with turns added at the end."""
    if moving:
        cut = previous.rindex(MARK)
        previous = previous[:cut] + previous[cut + len(MARK) :]
    stable = previous[: -len(b"]}")]  # the conversation's closing bracket and the body's
    assert current.startswith(stable)
    assert current[len(stable) : len(stable) + 2] == b",{"


def test_anthropic_sets_three_breakpoints_and_each_round_extends_the_last() -> None:
    sent = converse(
        AnthropicProvider, anthropic_reply, thinking={"type": "enabled", "budget_tokens": 1024}
    )
    for previous, current in itertools.pairwise(sent):
        assert_extends(previous, current, moving=True)
    body = json.loads(sent[-1])
    assert "cache" not in body
    assert body["tools"][-1]["cache_control"] == EPHEMERAL
    assert "cache_control" not in body["tools"][0]
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}
    ]
    assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert sent[-1].count(b'"cache_control"') == 3
    # The thinking blocks go back verbatim and unmarked, first in their turns.
    assistant = [turn["content"] for turn in body["messages"] if turn["role"] == "assistant"]
    assert [blocks[0] for blocks in assistant] == [
        {"type": "thinking", "thinking": f"Step {i}.", "signature": f"sig-{i}=="}
        for i in range(ROUNDS - 1)
    ]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}


def test_anthropic_caching_can_be_turned_off() -> None:
    sent = converse(AnthropicProvider, anthropic_reply, cache=False)
    assert all(b"cache" not in request for request in sent)
    assert json.loads(sent[-1])["system"] == "You are terse."
    for previous, current in itertools.pairwise(sent):
        assert_extends(previous, current, moving=False)


def test_breakpoints_never_exceed_four_nor_go_on_thinking() -> None:
    marked = {"type": "text", "text": "a", "cache_control": EPHEMERAL}
    body = {
        "system": "S",
        "tools": [{"name": "t"}],
        "messages": [
            {"role": "user", "content": [dict(marked), dict(marked), dict(marked), {"text": "b"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]},
        ],
    }
    place_breakpoints(body)
    # One free: the rolling breakpoint, on the last block that may carry one.
    assert json.dumps(body).count("cache_control") == 4
    assert body["messages"][0]["content"][-1] == {"text": "b", "cache_control": EPHEMERAL}
    assert body["messages"][1]["content"] == [{"type": "thinking", "thinking": "x"}]
    assert body["system"] == [{"type": "text", "text": "S"}]
    assert body["tools"] == [{"name": "t"}]


@pytest.mark.parametrize(
    ("cls", "reply"),
    [(OpenAIProvider, openai_reply), (OpenAIResponsesProvider, responses_reply)],
)
def test_openai_sends_one_cache_key_per_conversation(cls: type, reply: Any) -> None:
    sent = converse(cls, reply)
    for previous, current in itertools.pairwise(sent):
        assert_extends(previous, current, moving=False)
    keys = {json.loads(request)["prompt_cache_key"] for request in sent}
    assert keys == {prefix_key(START)}
    assert "cache" not in json.loads(sent[0])
    other = prefix_key([START[0], ChatMessage.user("Weather in Oslo?")])
    assert other != prefix_key(START)


@pytest.mark.parametrize(
    ("cls", "reply"),
    [(OpenAIProvider, openai_reply), (OpenAIResponsesProvider, responses_reply)],
)
def test_openai_cache_key_off_by_option_or_for_other_servers(cls: type, reply: Any) -> None:
    for options in ({"cache": False}, {"base_url": "http://localhost:8000/v1"}):
        sent = converse(cls, reply, **options)
        assert all(b"cache" not in request for request in sent)


def test_openai_entry_key_wins() -> None:
    sent = converse(OpenAIProvider, openai_reply, prompt_cache_key="tenant-7")
    assert {json.loads(request)["prompt_cache_key"] for request in sent} == {"tenant-7"}
    sent = converse(OpenAIResponsesProvider, responses_reply, prompt_cache_key="tenant-7")
    assert {json.loads(request)["prompt_cache_key"] for request in sent} == {"tenant-7"}
