import json

import httpx
import pytest

from llm_conversations.core.completions import FinishReason, Usage
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.providers import (
    InvalidRequestError,
    OllamaProvider,
    ProviderError,
    ResponseCompleted,
    TextDelta,
    ToolCallCompleted,
    to_ollama_request,
)

from .conftest import CONVERSATION, TOOLS, WEATHER_SCHEMA, Recorder

TEXT_REPLY = {
    "model": "llama3.2",
    "created_at": "2025-06-01T10:00:00.000000Z",
    "message": {"role": "assistant", "content": "Nothing else."},
    "done_reason": "stop",
    "done": True,
    "total_duration": 2_347_998_750,
    "prompt_eval_count": 155,
    "prompt_eval_duration": 321_024_542,
    "eval_count": 81,
    "eval_duration": 2_005_950_875,
}


def calls_reply(*calls: dict) -> dict:
    return {
        "model": "llama3.2",
        "message": {"role": "assistant", "content": "", "tool_calls": list(calls)},
        "done_reason": "stop",
        "done": True,
        "prompt_eval_count": 60,
        "eval_count": 20,
    }


def ndjson(*lines: dict) -> httpx.Response:
    content = "\n".join(json.dumps(line) for line in lines) + "\n"
    return httpx.Response(
        200, content=content.encode(), headers={"content-type": "application/x-ndjson"}
    )


def test_exact_request(make_provider):
    recorder = Recorder(httpx.Response(200, json=TEXT_REPLY))
    provider, _ = make_provider(OllamaProvider, recorder, model="llama3.2", api_key=None)
    provider.complete(CONVERSATION, tools=TOOLS, temperature=0.1, max_tokens=64, keep_alive="5m")
    request = recorder.requests[0]
    assert str(request.url) == "http://127.0.0.1:11434/api/chat"
    assert "authorization" not in request.headers
    assert recorder.body == {
        "model": "llama3.2",
        "stream": False,
        "keep_alive": "5m",
        "options": {"temperature": 0.1, "num_predict": 64},
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris, and the time?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                    {"function": {"name": "get_time", "arguments": {}}},
                ],
            },
            {"role": "tool", "content": "18C, cloudy", "tool_name": "get_weather"},
            {"role": "tool", "content": "clock unavailable", "tool_name": "get_time"},
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


def test_text_reply_parsing(make_provider):
    provider, _ = make_provider(OllamaProvider, Recorder(httpx.Response(200, json=TEXT_REPLY)))
    response = provider.complete([ChatMessage.user("hi")])
    assert response.content == "Nothing else."
    assert response.finish_reason is FinishReason.STOP
    assert response.raw_finish_reason == "stop"
    assert response.usage == Usage(input_tokens=155, output_tokens=81, total_tokens=236)
    assert response.model == "llama3.2"
    assert response.provider == "ollama"
    assert response.raw == TEXT_REPLY


def test_tool_calls_get_ids_unique_across_turns(make_provider):
    reply = calls_reply(
        {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
        {"function": {"name": "get_weather", "arguments": {"city": "Bergen"}}},
    )
    provider, _ = make_provider(OllamaProvider, Recorder(httpx.Response(200, json=reply)))
    response = provider.complete(CONVERSATION)
    first, second = response.tool_calls
    assert first.arguments == {"city": "Oslo"}
    assert second.arguments == {"city": "Bergen"}
    assert first.id != second.id
    assert {first.id, second.id}.isdisjoint({"call_1", "call_2"})
    assert response.finish_reason is FinishReason.TOOL_CALLS
    assert response.usage == Usage(input_tokens=60, output_tokens=20)


def test_string_arguments_that_do_not_parse_are_kept_raw(make_provider):
    reply = calls_reply({"function": {"name": "get_weather", "arguments": "{city: Oslo"}})
    provider, _ = make_provider(OllamaProvider, Recorder(httpx.Response(200, json=reply)))
    (call,) = provider.complete([ChatMessage.user("w")]).tool_calls
    assert call.malformed
    assert call.raw_arguments == "{city: Oslo"


def test_model_not_found_maps_to_invalid_request(make_provider):
    body = {"error": "model 'llama9' not found, try pulling it first"}
    provider, sleeps = make_provider(OllamaProvider, Recorder(httpx.Response(404, json=body)))
    with pytest.raises(InvalidRequestError) as info:
        provider.complete([ChatMessage.user("w")])
    assert info.value.status_code == 404
    assert info.value.provider_message == "model 'llama9' not found, try pulling it first"
    assert sleeps == []


def test_stream_reassembles_ndjson(make_provider):
    recorder = Recorder(
        ndjson(
            {
                "model": "llama3.2",
                "message": {"role": "assistant", "content": "Che"},
                "done": False,
            },
            {
                "model": "llama3.2",
                "message": {"role": "assistant", "content": "cking"},
                "done": False,
            },
            {
                "model": "llama3.2",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"function": {"name": "get_time", "arguments": {}}}],
                },
                "done": False,
            },
            {
                "model": "llama3.2",
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": 31,
                "eval_count": 9,
            },
        )
    )
    provider, _ = make_provider(OllamaProvider, recorder)
    events = list(provider.stream([ChatMessage.user("time?")]))
    assert recorder.body["stream"] is True
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Che", "cking"]
    (call,) = [e.tool_call for e in events if isinstance(e, ToolCallCompleted)]
    assert (call.name, call.arguments) == ("get_time", {})
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.content == "Checking"
    assert final.response.tool_calls == (call,)
    assert final.response.finish_reason is FinishReason.TOOL_CALLS
    assert final.response.usage == Usage(input_tokens=31, output_tokens=9)


def test_stream_error_line_raises(make_provider):
    provider, _ = make_provider(OllamaProvider, Recorder(ndjson({"error": "out of memory"})))
    with pytest.raises(ProviderError, match="out of memory"):
        list(provider.stream([ChatMessage.user("w")]))


def test_reply_tool_call_round_trips_into_the_next_request():
    call = ToolCall("x", "get_time", {})
    body = to_ollama_request(
        [ChatMessage.user("t"), ChatMessage.assistant_tool_calls([call])],
        [],
        model="m",
        stream=False,
        options={},
    )
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "get_time", "arguments": {}}}],
    }
