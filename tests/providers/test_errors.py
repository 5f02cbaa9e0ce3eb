"""Retries, error mapping and key redaction, shared by every HTTP adapter."""

import logging

import httpx
import pytest

from llm_conversations.core.messages import ChatMessage
from llm_conversations.providers import (
    AnthropicProvider,
    AuthenticationError,
    GeminiProvider,
    InvalidRequestError,
    InvalidResponseError,
    OllamaProvider,
    OpenAIProvider,
    ProviderTimeout,
    ProviderUnavailableError,
    RateLimitError,
)
from llm_conversations.providers.http import BACKOFF_MAX

from .conftest import API_KEY, Recorder

OK = {
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}
HELLO = [ChatMessage.user("hello")]
ADAPTERS = [OpenAIProvider, AnthropicProvider, GeminiProvider, OllamaProvider]
# A minimal successful reply saying "ok", in each adapter's own format.
OK_REPLIES = {
    OpenAIProvider: OK,
    AnthropicProvider: {
        "model": "claude-test",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
    GeminiProvider: {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
        ]
    },
    OllamaProvider: {
        "model": "llama-test",
        "message": {"role": "assistant", "content": "ok"},
        "done": True,
        "done_reason": "stop",
    },
}


def error(status: int, message: str = "nope", **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"error": {"message": message}}, headers=headers)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_429_honours_retry_after(make_provider, adapter):
    recorder = Recorder(
        error(429, "Rate limit reached", **{"retry-after": "7"}),
        httpx.Response(200, json=OK_REPLIES[adapter]),
    )
    provider, sleeps = make_provider(adapter, recorder)
    assert provider.complete(HELLO).content == "ok"
    assert sleeps == [7.0]
    assert len(recorder.requests) == 2


def test_retry_after_ms_wins(make_provider):
    recorder = Recorder(
        error(429, **{"retry-after-ms": "250", "retry-after": "1"}), httpx.Response(200, json=OK)
    )
    provider, sleeps = make_provider(OpenAIProvider, recorder)
    provider.complete(HELLO)
    assert sleeps == [0.25]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_503_then_success_backs_off_with_jitter(make_provider, adapter):
    recorder = Recorder(error(503), error(502), httpx.Response(200, json=OK_REPLIES[adapter]))
    provider, sleeps = make_provider(adapter, recorder, max_retries=2)
    assert provider.complete(HELLO).content == "ok"
    assert len(sleeps) == 2
    assert 0.25 <= sleeps[0] <= 0.5  # attempt 0: half of 0.5 fixed, half random
    assert 0.5 <= sleeps[1] <= 1.0
    assert all(s <= BACKOFF_MAX for s in sleeps)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_timeout_then_success(make_provider, adapter):
    recorder = Recorder(
        httpx.ReadTimeout("timed out"), httpx.Response(200, json=OK_REPLIES[adapter])
    )
    provider, sleeps = make_provider(adapter, recorder)
    assert provider.complete(HELLO).content == "ok"
    assert len(sleeps) == 1


def test_connection_error_then_success(make_provider):
    recorder = Recorder(httpx.ConnectError("connection refused"), httpx.Response(200, json=OK))
    provider, sleeps = make_provider(OpenAIProvider, recorder)
    assert provider.complete(HELLO).content == "ok"
    assert len(sleeps) == 1


def test_timeouts_exhaust_retries(make_provider):
    recorder = Recorder(*[httpx.ReadTimeout("timed out") for _ in range(3)])
    provider, sleeps = make_provider(OpenAIProvider, recorder, max_retries=2, timeout=5)
    with pytest.raises(ProviderTimeout, match="5s"):
        provider.complete(HELLO)
    assert len(recorder.requests) == 3
    assert len(sleeps) == 2


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_no_retry_on_400(make_provider, adapter):
    recorder = Recorder(
        error(400, "Invalid 'messages[0].role'"), httpx.Response(200, json=OK_REPLIES[adapter])
    )
    provider, sleeps = make_provider(adapter, recorder)
    with pytest.raises(InvalidRequestError) as info:
        provider.complete(HELLO)
    assert info.value.status_code == 400
    assert "Invalid 'messages[0].role'" in info.value.provider_message
    assert len(recorder.requests) == 1
    assert sleeps == []


def test_long_retry_after_is_not_slept_through(make_provider):
    recorder = Recorder(error(429, **{"retry-after": "3600"}))
    provider, sleeps = make_provider(OpenAIProvider, recorder)
    with pytest.raises(RateLimitError) as info:
        provider.complete(HELLO)
    assert info.value.retry_after == 3600.0
    assert sleeps == []


def test_rate_limit_after_retries_carries_retry_after(make_provider):
    recorder = Recorder(*[error(429, **{"retry-after": "2"}) for _ in range(2)])
    provider, sleeps = make_provider(OpenAIProvider, recorder, max_retries=1)
    with pytest.raises(RateLimitError) as info:
        provider.complete(HELLO)
    assert info.value.retry_after == 2.0
    assert info.value.retryable
    assert sleeps == [2.0]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (401, AuthenticationError),
        (403, AuthenticationError),
        (404, InvalidRequestError),
        (422, InvalidRequestError),
        (429, RateLimitError),
        (500, ProviderUnavailableError),
        (529, ProviderUnavailableError),
    ],
)
@pytest.mark.parametrize("cls", ADAPTERS)
def test_status_mapping(make_provider, cls, status, expected):
    provider, _ = make_provider(cls, Recorder(error(status, "explained")), max_retries=0)
    with pytest.raises(expected) as info:
        provider.complete(HELLO)
    assert type(info.value) is expected
    assert info.value.status_code == status
    assert info.value.provider == cls.backend
    assert info.value.provider_message == "explained"


def test_stream_retries_before_the_first_byte(make_provider):
    body = 'data: {"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    recorder = Recorder(error(503), httpx.Response(200, content=body.encode()))
    provider, sleeps = make_provider(OpenAIProvider, recorder)
    events = list(provider.stream(HELLO))
    assert events[-1].response.content == "hi"
    assert len(sleeps) == 1


def test_non_json_body_is_an_invalid_response(make_provider):
    recorder = Recorder(httpx.Response(200, content=b"<html>proxy</html>"))
    provider, _ = make_provider(OpenAIProvider, recorder)
    with pytest.raises(InvalidResponseError):
        provider.complete(HELLO)


def test_unexpected_shape_is_an_invalid_response(make_provider):
    provider, _ = make_provider(OpenAIProvider, Recorder(httpx.Response(200, json={"choices": []})))
    with pytest.raises(InvalidResponseError, match="unreadable"):
        provider.complete(HELLO)


@pytest.mark.parametrize("cls", ADAPTERS)
def test_key_never_leaks(make_provider, caplog, cls):
    echoed = f"Incorrect API key provided: {API_KEY}"
    recorder = Recorder(
        error(503, echoed),
        httpx.ConnectError(f"failed for {API_KEY}"),
        error(401, echoed),
    )
    provider, _ = make_provider(cls, recorder, max_retries=2)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AuthenticationError) as info:
        provider.complete(HELLO)
    assert len(caplog.records) >= 2  # the two retries were logged
    assert API_KEY not in caplog.text
    assert API_KEY not in str(info.value)
    assert API_KEY not in repr(info.value)
    assert API_KEY not in (info.value.provider_message or "")
    assert "[redacted]" in str(info.value)
    assert API_KEY not in repr(provider)
    assert "test-model" in repr(provider)


def test_key_is_redacted_from_raw(make_provider):
    reply = {
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"key {API_KEY}"},
                "finish_reason": "stop",
            }
        ],
    }
    provider, _ = make_provider(OpenAIProvider, Recorder(httpx.Response(200, json=reply)))
    response = provider.complete(HELLO)
    assert API_KEY not in repr(response.raw)
    assert response.raw["choices"][0]["message"]["content"] == "key [redacted]"


def test_owned_client_is_closed_and_passed_client_is_not():
    owned = OpenAIProvider(model="m", api_key=API_KEY)
    owned.close()
    assert owned._client.is_closed
    client = httpx.Client()
    passed = OpenAIProvider(model="m", http_client=client)
    passed.close()
    assert not client.is_closed
    client.close()
