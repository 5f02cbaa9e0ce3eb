import httpx
import pytest

from llm_conversations.core.completions import FinishReason, Usage
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.providers import (
    AuthenticationError,
    GeminiProvider,
    InvalidResponseError,
    ResponseCompleted,
    TextDelta,
    ToolCallCompleted,
    to_gemini_request,
)

from .conftest import API_KEY, CONVERSATION, TOOLS, WEATHER_SCHEMA, Recorder, sse

TEXT_REPLY = {
    "candidates": [
        {
            "content": {"parts": [{"text": "Nothing "}, {"text": "else."}], "role": "model"},
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 80,
        "candidatesTokenCount": 3,
        "thoughtsTokenCount": 7,
        "totalTokenCount": 90,
        "cachedContentTokenCount": 40,
    },
    "modelVersion": "gemini-2.5-flash",
    "responseId": "abc",
}


def calls_reply(*parts: dict) -> dict:
    return {
        "candidates": [
            {"content": {"parts": list(parts), "role": "model"}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 8, "totalTokenCount": 28},
        "modelVersion": "gemini-2.5-flash",
    }


def test_exact_request(make_provider):
    recorder = Recorder(httpx.Response(200, json=TEXT_REPLY))
    provider, _ = make_provider(GeminiProvider, recorder, model="gemini-2.5-flash")
    provider.complete(CONVERSATION, tools=TOOLS, temperature=0.3, max_tokens=100)
    request = recorder.requests[0]
    assert str(request.url) == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert request.headers["x-goog-api-key"] == API_KEY
    assert API_KEY not in str(request.url)
    assert recorder.body == {
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Weather in Paris, and the time?"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Checking."},
                    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                    {"functionCall": {"name": "get_time", "args": {}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "name": "get_weather",
                            "response": {"output": "18C, cloudy"},
                        }
                    },
                    {
                        "functionResponse": {
                            "name": "get_time",
                            "response": {"error": "clock unavailable"},
                        }
                    },
                ],
            },
            {"role": "user", "parts": [{"text": "Thanks. Anything else?"}]},
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Current weather",
                        "parametersJsonSchema": WEATHER_SCHEMA,
                    },
                    {
                        "name": "get_time",
                        "description": "Current time",
                        "parametersJsonSchema": {"type": "object", "properties": {}},
                    },
                ]
            }
        ],
        "generationConfig": {"temperature": 0.3, "maxOutputTokens": 100},
    }


def test_results_are_sent_in_call_order():
    messages = [
        ChatMessage.user("go"),
        ChatMessage.assistant_tool_calls([ToolCall("a", "first", {}), ToolCall("b", "second", {})]),
        ChatMessage.tool_result("b", "2"),
        ChatMessage.tool_result("a", "1"),
    ]
    body = to_gemini_request(messages, [], model="gemini-2.5-flash", options={})
    assert body["contents"][2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "first", "response": {"output": "1"}}},
            {"functionResponse": {"name": "second", "response": {"output": "2"}}},
        ],
    }


def test_gemini_3_replays_calls_with_the_documented_signature_stand_in():
    body = to_gemini_request(CONVERSATION, [], model="gemini-3-pro-preview", options={})
    parts = body["contents"][1]["parts"]
    assert parts[1] == {
        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
        "thoughtSignature": "skip_thought_signature_validator",
    }
    assert "thoughtSignature" not in parts[2]


def test_text_reply_parsing(make_provider):
    provider, _ = make_provider(GeminiProvider, Recorder(httpx.Response(200, json=TEXT_REPLY)))
    response = provider.complete([ChatMessage.user("hi")])
    assert response.content == "Nothing else."
    assert response.finish_reason is FinishReason.STOP
    assert response.raw_finish_reason == "STOP"
    # Output counts the thinking tokens, which are the reasoning tokens.
    assert response.usage == Usage(
        input_tokens=80, output_tokens=10, total_tokens=90, cached_tokens=40, reasoning_tokens=7
    )
    assert response.model == "gemini-2.5-flash"
    assert response.provider == "gemini"
    assert response.raw == TEXT_REPLY


def test_calls_under_stop_get_fresh_unique_ids(make_provider):
    reply = calls_reply(
        {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
        {"functionCall": {"name": "get_time"}},
    )
    provider, _ = make_provider(GeminiProvider, Recorder(httpx.Response(200, json=reply)))
    response = provider.complete(CONVERSATION)
    first, second = response.tool_calls
    assert (first.name, first.arguments) == ("get_weather", {"city": "Oslo"})
    assert (second.name, second.arguments) == ("get_time", {})
    assert first.id != second.id
    assert {first.id, second.id}.isdisjoint({"call_1", "call_2"})
    assert response.finish_reason is FinishReason.TOOL_CALLS
    assert response.raw_finish_reason == "STOP"
    assert response.usage == Usage(input_tokens=20, output_tokens=8, total_tokens=28)


def test_non_object_args_are_kept_raw(make_provider):
    reply = calls_reply({"functionCall": {"name": "get_weather", "args": ["Oslo"]}})
    provider, _ = make_provider(GeminiProvider, Recorder(httpx.Response(200, json=reply)))
    (call,) = provider.complete([ChatMessage.user("w")]).tool_calls
    assert call.malformed
    assert call.raw_arguments == '["Oslo"]'


def test_blocked_prompt_is_a_content_filter(make_provider):
    reply = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 9}}
    provider, _ = make_provider(GeminiProvider, Recorder(httpx.Response(200, json=reply)))
    response = provider.complete([ChatMessage.user("w")])
    assert response.finish_reason is FinishReason.CONTENT_FILTER
    assert response.raw_finish_reason == "SAFETY"


@pytest.mark.parametrize("reason", ["MODEL_ARMOR", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"])
def test_blocking_finish_reasons_are_a_content_filter(make_provider, reason):
    reply = {"candidates": [{"content": {"parts": [], "role": "model"}, "finishReason": reason}]}
    provider, _ = make_provider(GeminiProvider, Recorder(httpx.Response(200, json=reply)))
    response = provider.complete([ChatMessage.user("w")])
    assert response.finish_reason is FinishReason.CONTENT_FILTER
    assert response.raw_finish_reason == reason


@pytest.mark.parametrize("reason", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"])
@pytest.mark.parametrize("stream", [False, True])
def test_an_unusable_function_call_is_an_invalid_response_not_an_empty_answer(
    make_provider, reason, stream
):
    chunk = {
        "candidates": [{"content": {"parts": [], "role": "model"}, "finishReason": reason}],
        "usageMetadata": {"promptTokenCount": 9},
    }
    body = sse((None, chunk)) if stream else httpx.Response(200, json=chunk)
    provider, _ = make_provider(GeminiProvider, Recorder(body))

    def call() -> object:
        if stream:
            return list(provider.stream([ChatMessage.user("w")], tools=TOOLS))
        return provider.complete([ChatMessage.user("w")], tools=TOOLS)

    with pytest.raises(InvalidResponseError, match=reason):
        call()


def test_invalid_key_is_an_authentication_error(make_provider):
    body = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [{"reason": "API_KEY_INVALID", "domain": "googleapis.com"}],
        }
    }
    recorder = Recorder(httpx.Response(400, json=body))
    provider, sleeps = make_provider(GeminiProvider, recorder)
    with pytest.raises(AuthenticationError, match="API key not valid") as info:
        provider.complete([ChatMessage.user("w")])
    assert info.value.status_code == 400
    assert sleeps == []


def test_stream_reassembles_sse_chunks(make_provider):
    chunks = [
        {
            "candidates": [{"content": {"parts": [{"text": "Look"}], "role": "model"}}],
            "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
            "modelVersion": "gemini-2.5-flash",
        },
        {
            "candidates": [{"content": {"parts": [{"text": "ing."}], "role": "model"}}],
            "modelVersion": "gemini-2.5-flash",
        },
        {
            "candidates": [
                {
                    "content": {
                        "parts": [
                            {"functionCall": {"name": "get_weather", "args": {"city": "Nice"}}}
                        ],
                        "role": "model",
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 12,
                "candidatesTokenCount": 6,
                "totalTokenCount": 18,
            },
            "modelVersion": "gemini-2.5-flash",
        },
    ]
    recorder = Recorder(sse(*[(None, c) for c in chunks]))
    provider, _ = make_provider(GeminiProvider, recorder, model="gemini-2.5-flash")
    events = list(provider.stream([ChatMessage.user("weather in Nice?")]))
    assert str(recorder.requests[0].url).endswith(
        "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Look", "ing."]
    (call,) = [e.tool_call for e in events if isinstance(e, ToolCallCompleted)]
    assert (call.name, call.arguments) == ("get_weather", {"city": "Nice"})
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.content == "Looking."
    assert final.response.tool_calls == (call,)
    assert final.response.finish_reason is FinishReason.TOOL_CALLS
    assert final.response.usage == Usage(input_tokens=12, output_tokens=6, total_tokens=18)
