import httpx
import pytest

from llm_conversations.core.completions import FinishReason, Usage
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.providers import (
    AnthropicProvider,
    RateLimitError,
    ResponseCompleted,
    TextDelta,
    ToolCallCompleted,
    to_anthropic_request,
)

from .conftest import API_KEY, CONVERSATION, TOOLS, WEATHER_SCHEMA, Recorder, sse

EPHEMERAL = {"type": "ephemeral"}

TEXT_REPLY = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Nothing else."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 100,
        "cache_creation_input_tokens": 20,
        "cache_read_input_tokens": 30,
        "output_tokens": 5,
    },
}


def tool_reply(tool_input: object) -> dict:
    return {
        "id": "msg_02",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": tool_input},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 40, "output_tokens": 12},
    }


def test_exact_request(make_provider):
    recorder = Recorder(httpx.Response(200, json=TEXT_REPLY))
    provider, _ = make_provider(AnthropicProvider, recorder, model="claude-sonnet-4-5")
    provider.complete(CONVERSATION, tools=TOOLS, temperature=0)
    request = recorder.requests[0]
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == API_KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert recorder.body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "temperature": 0,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Weather in Paris, and the time?"}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {"type": "tool_use", "id": "call_2", "name": "get_time", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "18C, cloudy"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_2",
                        "content": "clock unavailable",
                        "is_error": True,
                    },
                    {"type": "text", "text": "Thanks. Anything else?", "cache_control": EPHEMERAL},
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather",
                "input_schema": WEATHER_SCHEMA,
            },
            {
                "name": "get_time",
                "description": "Current time",
                "input_schema": {"type": "object", "properties": {}},
                "cache_control": EPHEMERAL,
            },
        ],
    }


def test_systems_joined_same_roles_merged_no_empty_text():
    messages = [
        ChatMessage.system("Rule one."),
        ChatMessage.user("a"),
        ChatMessage.user("b"),
        ChatMessage.system("Rule two."),
        ChatMessage.assistant_tool_calls([ToolCall("t1", "get_time", {})]),
        ChatMessage.tool_result("t1", ""),
    ]
    body = to_anthropic_request(messages, [], model="m", options={"max_tokens": 50, "stop": "X"})
    assert body == {
        "model": "m",
        "max_tokens": 50,
        "stop_sequences": ["X"],
        "system": [{"type": "text", "text": "Rule one.\n\nRule two.", "cache_control": EPHEMERAL}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "get_time", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "cache_control": EPHEMERAL}
                ],
            },
        ],
    }


def test_max_tokens_default_is_configurable(make_provider):
    recorder = Recorder(httpx.Response(200, json=TEXT_REPLY))
    provider, _ = make_provider(AnthropicProvider, recorder, max_tokens=256)
    provider.complete([ChatMessage.user("hi")])
    assert recorder.body["max_tokens"] == 256


def test_text_reply_parsing(make_provider):
    provider, _ = make_provider(AnthropicProvider, Recorder(httpx.Response(200, json=TEXT_REPLY)))
    response = provider.complete([ChatMessage.user("hi")])
    assert response.content == "Nothing else."
    assert response.finish_reason is FinishReason.STOP
    assert response.raw_finish_reason == "end_turn"
    assert response.usage == Usage(
        input_tokens=150, output_tokens=5, cached_tokens=30, cache_write_tokens=20
    )
    assert response.model == "claude-sonnet-4-5-20250929"
    assert response.provider == "anthropic"
    assert response.raw == TEXT_REPLY


def test_tool_call_reply_parsing(make_provider):
    reply = tool_reply({"city": "Oslo"})
    provider, _ = make_provider(AnthropicProvider, Recorder(httpx.Response(200, json=reply)))
    response = provider.complete([ChatMessage.user("weather?")])
    assert response.content == "Let me look."
    assert response.tool_calls == (ToolCall("toolu_01", "get_weather", {"city": "Oslo"}),)
    assert response.finish_reason is FinishReason.TOOL_CALLS
    assert response.usage == Usage(input_tokens=40, output_tokens=12)


def test_non_object_input_is_kept_raw(make_provider):
    reply = tool_reply(["Oslo"])
    provider, _ = make_provider(AnthropicProvider, Recorder(httpx.Response(200, json=reply)))
    (call,) = provider.complete([ChatMessage.user("weather?")]).tool_calls
    assert call.malformed
    assert call.raw_arguments == '["Oslo"]'


def test_stream_reassembles_text_and_tool_input(make_provider):
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_s",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": 25, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("ping", {"type": "ping"}),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "On "},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "it."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_9",
                    "name": "get_weather",
                    "input": {},
                },
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"city": "Li'},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": 'ma"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_10",
                    "name": "get_time",
                    "input": {},
                },
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 2}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 33},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    recorder = Recorder(sse(*events))
    provider, _ = make_provider(AnthropicProvider, recorder)
    out = list(provider.stream([ChatMessage.user("weather in Lima?")]))
    assert recorder.body["stream"] is True
    assert [e.text for e in out if isinstance(e, TextDelta)] == ["On ", "it."]
    assert [e.tool_call for e in out if isinstance(e, ToolCallCompleted)] == [
        ToolCall("toolu_9", "get_weather", {"city": "Lima"}),
        ToolCall("toolu_10", "get_time", {}),
    ]
    final = out[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.content == "On it."
    assert final.response.finish_reason is FinishReason.TOOL_CALLS
    assert final.response.usage == Usage(input_tokens=25, output_tokens=33)


def test_stream_error_event_is_typed(make_provider):
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    provider, _ = make_provider(AnthropicProvider, Recorder(sse(("error", error))))
    with pytest.raises(RateLimitError, match="slow down"):
        list(provider.stream([ChatMessage.user("hi")]))


def test_call_ids_another_provider_made_are_rewritten_the_same_way_for_call_and_result():
    import re

    history = [
        ChatMessage.user("version?"),
        ChatMessage.assistant_tool_calls(
            [ToolCall("llm_version:0", "get_time"), ToolCall("ok_id-1", "get_time")]
        ),
        ChatMessage.tool_result("llm_version:0", "1.0"),
        ChatMessage.tool_result("ok_id-1", "2.0"),
    ]
    first = to_anthropic_request(history, [], model="m", options={})
    second = to_anthropic_request(
        [*history, ChatMessage.assistant("done"), ChatMessage.user("again")],
        [],
        model="m",
        options={},
    )
    for body in (first, second):
        uses = [b["id"] for b in body["messages"][1]["content"] if b["type"] == "tool_use"]
        results = [
            b["tool_use_id"] for b in body["messages"][2]["content"] if b["type"] == "tool_result"
        ]
        assert uses == results
        assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", i) for i in uses)
        assert uses[1] == "ok_id-1"  # a valid id is sent as it is
        assert uses[0].startswith("llm_version_0_")
    # Stable from one round to the next: the cached prefix stays byte-identical.
    assert first["messages"][1] == second["messages"][1]
