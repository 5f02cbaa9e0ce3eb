"""Stream shapes no recording we found holds yet, built after the servers' own
documentation: a compatible stream ending without a finish reason, and error
chunks inside a stream classed by their own kind.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from llm_conversations.core.messages import ChatMessage
from llm_conversations.exceptions import ProviderError, ProviderUnavailableError
from llm_conversations.providers import OpenAIProvider, ResponseCompleted


def openai_compatible(body: str) -> OpenAIProvider:
    response = httpx.Response(
        200, content=body.encode(), headers={"content-type": "text/event-stream"}
    )
    return OpenAIProvider(
        model="m",
        api_key="k",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(lambda _request: response)),
    )


def sse(*chunks: Any) -> str:
    return "".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks)


def test_a_stream_with_usage_and_done_but_no_finish_reason_is_whole() -> None:
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},
    }
    body = sse(
        {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]},
        {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}},
        "[DONE]",
    )
    (reply,) = [
        e.response
        for e in openai_compatible(body).stream([ChatMessage.user("x")])
        if isinstance(e, ResponseCompleted)
    ]
    assert [c.name for c in reply.tool_calls] == ["f"]
    assert reply.finish_reason == "tool_calls"
    assert reply.usage.output_tokens == 3


def test_a_stream_that_stops_before_its_usage_without_a_finish_reason_ended_early() -> None:
    body = sse({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}, "[DONE]")
    with pytest.raises(ProviderUnavailableError, match="ended early"):
        list(openai_compatible(body).stream([ChatMessage.user("x")]))


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"code": 429, "message": "Rate limit exceeded"}, "RateLimitError"),
        ({"code": 502, "message": "Upstream error"}, "ProviderUnavailableError"),
        ({"code": 400, "message": "bad"}, "InvalidRequestError"),
        ({"type": "invalid_request_error", "message": "context too long"}, "InvalidRequestError"),
        ({"type": "server_error", "message": "overloaded"}, "ProviderUnavailableError"),
        ({"status": "RESOURCE_EXHAUSTED", "message": "quota"}, "RateLimitError"),
        ({"type": "authentication_error", "message": "no"}, "AuthenticationError"),
    ],
)
def test_an_error_inside_a_stream_is_classed_by_its_own_kind(
    error: dict[str, Any], kind: str
) -> None:
    body = sse({"choices": [{"index": 0, "delta": {"content": "Hi"}}]}, {"error": error})
    with pytest.raises(ProviderError) as info:
        list(openai_compatible(body).stream([ChatMessage.user("x")]))
    assert type(info.value).__name__ == kind
    assert error["message"] in str(info.value)
