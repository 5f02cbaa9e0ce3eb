"""Real provider responses, recorded by other projects, replayed through our adapters.

Each recording (tests/providers/recorded/, sources in SOURCES.md) is served
back at the HTTP boundary as it was recorded; what the adapter reads is
compared with what the recording itself holds, read here independently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from llm_conversations.core.messages import ChatMessage
from llm_conversations.exceptions import ProviderError, ProviderUnavailableError
from llm_conversations.providers import OpenAIProvider, ResponseCompleted, TextDelta

RECORDED = Path(__file__).parent / "recorded"


def interactions(name: str, host: str) -> list[dict[str, Any]]:
    """The recorded exchanges with ``host`` in the cassette ``name``."""
    cassette = yaml.safe_load((RECORDED / name).read_text())
    return [i for i in cassette["interactions"] if host in i["request"]["uri"]]


def served(response: dict[str, Any]) -> httpx.Response:
    """The recorded response as the server sent it."""
    status = response["status"]["code"]
    body = response.get("body") or {}
    if "string" in body:
        return httpx.Response(
            status, content=body["string"].encode(), headers={"content-type": "text/event-stream"}
        )
    return httpx.Response(status, json=response["parsed_body"])


def mistral(response: dict[str, Any]) -> OpenAIProvider:
    return OpenAIProvider(
        model="magistral-medium-latest",
        api_key="recorded",
        base_url="https://api.mistral.ai/v1",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(lambda _request: served(response))),
    )


def text_chunks(content: Any) -> str:
    """The text of a content value: a string, or Mistral's typed chunks (text ones only)."""
    if isinstance(content, str):
        return content
    return "".join(part["text"] for part in content or () if part.get("type") == "text")


def test_a_magistral_reply_with_thinking_chunks_reads_its_text() -> None:
    (exchange,) = interactions(
        "pydantic-ai/test_mistral_model_thinking_part.yaml", "api.mistral.ai"
    )
    recorded = exchange["response"]["parsed_body"]
    message = recorded["choices"][0]["message"]
    # The recording holds both kinds of chunk: thinking beside the text.
    assert {part["type"] for part in message["content"]} == {"thinking", "text"}
    reply = mistral(exchange["response"]).complete([ChatMessage.user("How do I cross the river?")])
    assert reply.content == text_chunks(message["content"])
    assert reply.content.startswith("Crossing a river is quite different")
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (
        recorded["usage"]["prompt_tokens"],
        recorded["usage"]["completion_tokens"],
    )


def test_a_streamed_magistral_reply_with_thinking_chunks_reads_its_text() -> None:
    (exchange,) = interactions(
        "pydantic-ai/test_mistral_model_thinking_part_iter.yaml", "api.mistral.ai"
    )
    body = exchange["response"]["body"]["string"]
    chunks = [
        json.loads(line.removeprefix("data: "))
        for line in body.splitlines()
        if line.startswith("data: {")
    ]
    deltas = [chunk["choices"][0]["delta"].get("content") for chunk in chunks if chunk["choices"]]
    assert any(isinstance(d, list) for d in deltas), "the recording streams typed chunks"
    expected = "".join(text_chunks(d) for d in deltas)
    events = list(mistral(exchange["response"]).stream([ChatMessage.user("Cross the street?")]))
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert streamed == final.response.content == expected
    assert expected
    usage = chunks[-1]["usage"]
    assert final.response.usage.output_tokens == usage["completion_tokens"]


# Shapes no recording we found holds yet: built after the servers' own documentation.


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
