import json

import httpx
import pytest

from llm_conversations.core.completions import FinishReason, Usage
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.providers import (
    OpenAIProvider,
    ResponseCompleted,
    TextDelta,
    ToolCallCompleted,
)
from llm_conversations.providers.caching import prefix_key

from .conftest import API_KEY, CONVERSATION, TOOLS, WEATHER_SCHEMA, Recorder, sse

TEXT_REPLY = {
    "id": "chatcmpl-abc",
    "object": "chat.completion",
    "created": 1730000000,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Nothing else.", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 120,
        "completion_tokens": 4,
        "total_tokens": 124,
        "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 3, "audio_tokens": 0},
    },
}


def tool_reply(arguments: str) -> dict:
    return {
        "id": "chatcmpl-def",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_9",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": arguments},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


def test_exact_request(make_provider):
    recorder = Recorder(httpx.Response(200, json=TEXT_REPLY))
    provider, _ = make_provider(OpenAIProvider, recorder, model="gpt-4o-mini", temperature=0.2)
    provider.complete(CONVERSATION, tools=TOOLS)
    request = recorder.requests[0]
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert recorder.body == {
        "model": "gpt-4o-mini",
        "temperature": 0.2,
        "prompt_cache_key": prefix_key(CONVERSATION),
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris, and the time?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "content": "18C, cloudy", "tool_call_id": "call_1"},
            {"role": "tool", "content": "clock unavailable", "tool_call_id": "call_2"},
            {"role": "user", "content": "Thanks. Anything else?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather",
                    "parameters": WEATHER_SCHEMA,
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "get_time",
                    "description": "Current time",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
        ],
    }


def test_dict_messages_and_dict_tools_are_accepted(make_provider):
    recorder = Recorder(httpx.Response(200, json=TEXT_REPLY))
    provider, _ = make_provider(OpenAIProvider, recorder, base_url="http://vllm:8000/v1/")
    tool = {"type": "function", "function": {"name": "get_time", "description": "Now"}}
    provider.complete([{"role": "user", "content": "hi"}], tools=[tool], max_tokens=5)
    assert str(recorder.requests[0].url) == "http://vllm:8000/v1/chat/completions"
    assert recorder.body == {
        "model": "test-model",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_time",
                    "description": "Now",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ],
    }


def test_text_reply_parsing(make_provider):
    provider, _ = make_provider(OpenAIProvider, Recorder(httpx.Response(200, json=TEXT_REPLY)))
    response = provider.complete([ChatMessage.user("hi")])
    assert response.content == "Nothing else."
    assert response.tool_calls == ()
    assert response.finish_reason is FinishReason.STOP
    assert response.raw_finish_reason == "stop"
    assert response.usage == Usage(
        input_tokens=120, output_tokens=4, total_tokens=124, cached_tokens=64, reasoning_tokens=3
    )
    assert response.model == "gpt-4o-mini-2024-07-18"
    assert response.provider == "openai"
    assert response.raw == TEXT_REPLY


def test_tool_call_reply_parsing(make_provider):
    reply = tool_reply('{"city": "Oslo"}')
    provider, _ = make_provider(OpenAIProvider, Recorder(httpx.Response(200, json=reply)))
    response = provider.complete([ChatMessage.user("weather?")])
    assert response.content == ""
    assert response.tool_calls == (ToolCall("call_9", "get_weather", {"city": "Oslo"}),)
    assert response.finish_reason is FinishReason.TOOL_CALLS
    assert response.usage == Usage(input_tokens=50, output_tokens=10, total_tokens=60)
    assert response.to_message().tool_calls == response.tool_calls


def test_malformed_arguments_are_kept_raw(make_provider):
    reply = tool_reply('{"city": "Os')
    provider, _ = make_provider(OpenAIProvider, Recorder(httpx.Response(200, json=reply)))
    (call,) = provider.complete([ChatMessage.user("weather?")]).tool_calls
    assert call.malformed
    assert call.raw_arguments == '{"city": "Os'
    assert call.arguments == {}


def test_reused_call_id_is_replaced_with_a_fresh_one(make_provider):
    reply = tool_reply("{}")
    reply["choices"][0]["message"]["tool_calls"][0]["id"] = "call_1"  # already in CONVERSATION
    provider, _ = make_provider(OpenAIProvider, Recorder(httpx.Response(200, json=reply)))
    (call,) = provider.complete(CONVERSATION).tool_calls
    assert call.id.startswith("call_")
    assert call.id not in {"call_1", "call_2"}


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_stream_reassembles_text_and_fragmented_calls(make_provider):
    fragments = [
        chunk({"role": "assistant", "content": None}),
        chunk({"content": "Let me "}),
        chunk({"content": "check."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty":"Rome"}'}}]}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({}, "tool_calls"),
        {
            "id": "chatcmpl-s",
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [],
            "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
        },
    ]
    recorder = Recorder(sse(*[(None, f) for f in fragments], (None, "[DONE]")))
    provider, _ = make_provider(OpenAIProvider, recorder)
    events = list(provider.stream([ChatMessage.user("weather in Rome?")], tools=TOOLS))
    assert recorder.body["stream"] is True
    assert recorder.body["stream_options"] == {"include_usage": True}
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me ", "check."]
    calls = [e.tool_call for e in events if isinstance(e, ToolCallCompleted)]
    assert calls == [
        ToolCall("call_a", "get_weather", {"city": "Rome"}),
        ToolCall("call_b", "get_time", {}),
    ]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.content == "Let me check."
    assert final.response.tool_calls == tuple(calls)
    assert final.response.finish_reason is FinishReason.TOOL_CALLS
    assert final.response.usage == Usage(input_tokens=30, output_tokens=12, total_tokens=42)
    assert len(final.response.raw["chunks"]) == len(fragments)


def test_stream_error_event_raises(make_provider):
    from llm_conversations.providers import ProviderError

    error = {"error": {"message": "server overloaded", "type": "server_error"}}
    provider, _ = make_provider(OpenAIProvider, Recorder(sse((None, json.dumps(error)))))
    with pytest.raises(ProviderError, match="server overloaded"):
        list(provider.stream([ChatMessage.user("hi")]))


def call_fragment(index, arguments, call_id=None, name=None):
    fragment = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        fragment.update(id=call_id, type="function")
        fragment["function"]["name"] = name
    return chunk({"tool_calls": [fragment]})


def test_stream_reassembles_interleaved_calls_by_index(make_provider):
    body = sse(
        (None, call_fragment(0, '{"city":', "call_a", "get_weather")),
        (None, call_fragment(1, "{", "call_b", "get_time")),
        (None, call_fragment(0, '"Lo')),
        (None, call_fragment(1, "}")),
        (None, call_fragment(0, 'ndon"}')),
        (None, chunk({}, "tool_calls")),
        (None, "[DONE]"),
    )
    provider, _ = make_provider(OpenAIProvider, Recorder(body))
    events = list(provider.stream([ChatMessage.user("hi")], tools=TOOLS))
    expected = [
        ToolCall("call_a", "get_weather", {"city": "London"}),
        ToolCall("call_b", "get_time", {}),
    ]
    # Reported once the choice finishes, in index order.
    assert events[:2] == [ToolCallCompleted(call) for call in expected]
    assert events[-1].response.tool_calls == tuple(expected)
    assert events[-1].response.finish_reason is FinishReason.TOOL_CALLS


def test_stream_reports_no_call_before_the_choice_finishes(make_provider):
    from llm_conversations.providers import ProviderError

    error = {"error": {"message": "stream cut", "type": "server_error"}}
    body = sse(
        (None, call_fragment(0, "{}", "call_a", "get_time")),
        (None, call_fragment(1, "{}", "call_b", "get_time")),
        (None, error),
    )
    provider, _ = make_provider(OpenAIProvider, Recorder(body))
    seen = []
    with pytest.raises(ProviderError, match="stream cut"):
        seen.extend(provider.stream([ChatMessage.user("hi")]))
    # A new index does not complete the earlier call: fragments may interleave.
    assert seen == []
