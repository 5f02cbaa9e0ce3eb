"""End markers, deadlines, size caps, redaction order, Retry-After and storable output.

Everything at the HTTP boundary: MockTransport for bodies, a small threaded
HTTP server on 127.0.0.1 for the deadline cases that need a real socket.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
from django.test import override_settings

from llm_conversations.core.completions import CompletionResponse, FinishReason
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.providers import (
    AnthropicProvider,
    GeminiProvider,
    InvalidResponseError,
    OllamaProvider,
    OpenAIProvider,
    Provider,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailableError,
    RateLimitError,
    ResponseCompleted,
    TextDelta,
    ToolCallCompleted,
)
from tests.support.http_server import Respond, serving, stop_event

from .conftest import API_KEY, Recorder, sse

HELLO = [ChatMessage.user("hello")]
ADAPTERS = [OpenAIProvider, AnthropicProvider, GeminiProvider, OllamaProvider]


def ndjson(*lines: dict[str, Any]) -> httpx.Response:
    content = "".join(json.dumps(line) + "\n" for line in lines)
    return httpx.Response(200, content=content.encode())


# End markers ---------------------------------------------------------------


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


UNFINISHED_STREAMS: dict[str, tuple[type[Provider], Callable[[], httpx.Response]]] = {
    "openai without finish_reason or [DONE]": (
        OpenAIProvider,
        lambda: sse(
            (None, openai_chunk({"content": "Let me check agai"})),
            (
                None,
                openai_chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_x",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city": "Lo'},
                            }
                        ]
                    }
                ),
            ),
        ),
    ),
    "openai [DONE] before any finish_reason": (
        OpenAIProvider,
        lambda: sse((None, openai_chunk({"content": "Partial"})), (None, "[DONE]")),
    ),
    "anthropic without message_stop": (
        AnthropicProvider,
        lambda: sse(
            ("message_start", {"type": "message_start", "message": {"model": "c", "usage": {}}}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "Partial answ"},
                },
            ),
        ),
    ),
    "gemini whose last chunk has no finishReason": (
        GeminiProvider,
        lambda: sse(
            (None, {"candidates": [{"content": {"role": "model", "parts": [{"text": "Half"}]}}]})
        ),
    ),
    "ollama without done: true": (
        OllamaProvider,
        lambda: ndjson({"model": "l", "message": {"role": "assistant", "content": "Half"}}),
    ),
}


@pytest.mark.parametrize("case", UNFINISHED_STREAMS)
def test_a_stream_without_its_end_marker_is_an_early_end(make_provider, case):
    adapter, body = UNFINISHED_STREAMS[case]
    provider, _ = make_provider(adapter, Recorder(body()))
    seen: list[Any] = []
    with pytest.raises(ProviderUnavailableError, match="the stream ended early") as info:
        seen.extend(provider.stream(HELLO))
    assert info.value.retryable
    # Text already streamed was shown, but no call and no reply came of it.
    assert all(isinstance(event, TextDelta) for event in seen)


def test_openai_finish_reason_without_done_is_a_whole_reply(make_provider):
    body = sse((None, openai_chunk({"content": "Hi"})), (None, openai_chunk({}, "stop")))
    recorder = Recorder(body)
    provider, _ = make_provider(OpenAIProvider, recorder, model="gpt-x", cache=False)
    events = list(provider.stream(HELLO))
    assert recorder.requests[0].content == (
        b'{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true},'
        b'"messages":[{"role":"user","content":"hello"}]}'
    )
    assert isinstance(events[-1], ResponseCompleted)
    assert events[-1].response.content == "Hi"
    assert events[-1].response.finish_reason is FinishReason.STOP


# Deadlines over a real socket -----------------------------------------------


def _drip_body(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", "100")
    handler.end_headers()
    handler.wfile.flush()
    for _ in range(100):
        handler.wfile.write(b" ")
        handler.wfile.flush()
        if stop_event(handler).wait(1.0):
            return


def _stall_after_one_chunk(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.end_headers()
    chunk = openai_chunk({"content": "Hel"})
    handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
    handler.wfile.flush()
    stop_event(handler).wait(30)


def _drip_keepalives(handler: BaseHTTPRequestHandler) -> None:
    # A comment every 0.5 s: never idle for TIMEOUT, never finished.
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.end_headers()
    chunk = openai_chunk({"content": "Hi"})
    handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
    for _ in range(6):
        handler.wfile.write(b": keep-alive\n\n")
        handler.wfile.flush()
        if stop_event(handler).wait(0.5):
            return
    done = openai_chunk({}, "stop")
    handler.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())
    handler.wfile.flush()


@pytest.fixture
def serve() -> Iterator[Callable[[Respond], str]]:
    """Serve ``respond`` on 127.0.0.1; returns the base URL."""
    with contextlib.ExitStack() as stack:

        def start(respond: Respond) -> str:
            return stack.enter_context(serving(respond)).root + "/v1"

        yield start


def test_timeout_bounds_a_whole_call_that_drips_one_byte_a_second(serve):
    provider = OpenAIProvider(model="m", base_url=serve(_drip_body), timeout=2, max_retries=0)
    began = time.monotonic()
    with pytest.raises(ProviderTimeout, match=r"longer than TIMEOUT \(2s\)"):
        provider.complete(HELLO)
    assert time.monotonic() - began < 4
    provider.close()


def test_a_stream_silent_for_timeout_fails(serve):
    provider = OpenAIProvider(
        model="m", base_url=serve(_stall_after_one_chunk), timeout=1, max_retries=0
    )
    began = time.monotonic()
    seen: list[Any] = []
    with pytest.raises(ProviderTimeout, match="stalled"):
        seen.extend(provider.stream(HELLO))
    assert time.monotonic() - began < 3
    assert seen == [TextDelta("Hel")]
    provider.close()


def test_a_stream_that_keeps_sending_may_outlast_timeout(serve):
    provider = OpenAIProvider(model="m", base_url=serve(_drip_keepalives), timeout=1, max_retries=0)
    began = time.monotonic()
    events = list(provider.stream(HELLO))
    assert time.monotonic() - began > 2  # longer than TIMEOUT, never silent for it
    assert isinstance(events[-1], ResponseCompleted)
    assert events[-1].response.content == "Hi"
    provider.close()


def test_connect_timeout_is_sent_as_httpx_connect_timeout():
    seen: list[dict[str, float]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return httpx.Response(200, json=OPENAI_OK)

    client = httpx.Client(transport=httpx.MockTransport(handler))
    provider = OpenAIProvider(model="m", http_client=client, timeout=30, connect_timeout=4)
    provider.complete(HELLO)
    assert seen == [{"connect": 4.0, "read": 30.0, "write": 30.0, "pool": 30.0}]


# MAX_REPLY_CHARS --------------------------------------------------------------

OPENAI_OK = {
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}


def openai_text(text: str) -> dict[str, Any]:
    reply = json.loads(json.dumps(OPENAI_OK))
    reply["choices"][0]["message"]["content"] = text
    return reply


@override_settings(LLM_CONVERSATIONS={"MAX_REPLY_CHARS": 10})
def test_reply_text_over_max_reply_chars_is_refused_without_retry(make_provider):
    recorder = Recorder(httpx.Response(200, json=openai_text("x" * 11)))
    provider, sleeps = make_provider(OpenAIProvider, recorder)
    with pytest.raises(InvalidResponseError, match=r"longer than MAX_REPLY_CHARS \(10 "):
        provider.complete(HELLO)
    assert len(recorder.requests) == 1
    assert sleeps == []


@override_settings(LLM_CONVERSATIONS={"MAX_REPLY_CHARS": 10})
def test_reply_text_at_max_reply_chars_is_accepted(make_provider):
    recorder = Recorder(httpx.Response(200, json=openai_text("x" * 10)))
    provider, _ = make_provider(OpenAIProvider, recorder)
    assert provider.complete(HELLO).content == "x" * 10


def test_arguments_over_max_reply_chars_are_refused(make_provider):
    reply = openai_text("")
    reply["choices"][0]["message"]["tool_calls"] = [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "f", "arguments": json.dumps({"q": "y" * 50})},
        }
    ]
    provider, _ = make_provider(
        OpenAIProvider, Recorder(httpx.Response(200, json=reply)), max_reply_chars=40
    )
    with pytest.raises(InvalidResponseError, match="arguments of 'f'"):
        provider.complete(HELLO)


class CountingStream(httpx.SyncByteStream):
    """A large body served in 64 KiB pieces, counting how many were read."""

    def __init__(self, prefix: bytes, size: int) -> None:
        self.prefix, self.size, self.read = prefix, size, 0

    def __iter__(self) -> Iterator[bytes]:
        yield self.prefix
        self.read += len(self.prefix)
        while self.read < self.size:
            self.read += 65536
            yield b"x" * 65536


def test_a_20_mb_body_is_not_read_whole(make_provider):
    body = CountingStream(b'{"model": "m", "choices": [{"message": {"content": "', 20_000_000)
    recorder = Recorder(httpx.Response(200, stream=body))
    provider, sleeps = make_provider(OpenAIProvider, recorder, max_reply_chars=1000)
    with pytest.raises(InvalidResponseError, match="larger than 69536 bytes"):
        provider.complete(HELLO)
    assert body.read < 200_000  # 4 bytes per character + 64 KiB, then it stopped
    assert sleeps == []


def test_stream_text_is_checked_as_it_arrives(make_provider):
    pieces = [(None, openai_chunk({"content": "abcd"})) for _ in range(100)]
    recorder = Recorder(sse(*pieces, (None, openai_chunk({}, "stop"))))
    provider, _ = make_provider(OpenAIProvider, recorder, max_reply_chars=10)
    seen: list[Any] = []
    with pytest.raises(InvalidResponseError, match="text is longer than MAX_REPLY_CHARS"):
        seen.extend(provider.stream(HELLO))
    assert seen == [TextDelta("abcd"), TextDelta("abcd")]  # the third went over


def test_stream_arguments_are_checked_as_they_arrive(make_provider):
    start = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f"}}
    more = {"index": 0, "function": {"arguments": "y" * 30}}
    recorder = Recorder(
        sse(
            (None, openai_chunk({"tool_calls": [start]})),
            *[(None, openai_chunk({"tool_calls": [more]})) for _ in range(5)],
            (None, openai_chunk({}, "tool_calls")),
        )
    )
    provider, _ = make_provider(OpenAIProvider, recorder, max_reply_chars=50)
    with pytest.raises(InvalidResponseError, match="tool call arguments"):
        list(provider.stream(HELLO))


def test_a_runaway_stream_is_capped_in_bytes(make_provider):
    body = CountingStream(b": keep-alive\n", 20_000_000)
    recorder = Recorder(httpx.Response(200, stream=body))
    provider, _ = make_provider(OpenAIProvider, recorder, max_reply_chars=1000)
    with pytest.raises(InvalidResponseError, match="larger than"):
        list(provider.stream(HELLO))
    assert body.read < 1_000_000  # 64 bytes per character + 64 KiB


# Redaction before truncation -------------------------------------------------


def key_fragments() -> list[str]:
    return [API_KEY[:n] for n in range(4, len(API_KEY) + 1)]


def assert_no_key_fragment(*texts: str | None) -> None:
    for text in texts:
        for fragment in key_fragments():
            assert fragment not in (text or ""), fragment


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_key_across_the_cut_of_a_plain_text_error_is_redacted(make_provider, adapter):
    text = "e" * 495 + API_KEY + " and more"
    recorder = Recorder(httpx.Response(400, text=text))
    provider, _ = make_provider(adapter, recorder)
    with pytest.raises(ProviderError) as info:
        provider.complete(HELLO)
    error = info.value
    assert error.provider_message == ("e" * 495 + "[redacted]")[:500]
    assert_no_key_fragment(str(error), repr(error), error.provider_message)


def test_key_across_the_cut_of_a_stream_error_is_redacted(make_provider):
    error = {"error": {"code": "x" * 470 + API_KEY}}  # no message: the JSON is quoted
    provider, _ = make_provider(OpenAIProvider, Recorder(sse((None, error))))
    with pytest.raises(ProviderUnavailableError) as info:
        list(provider.stream(HELLO))
    assert len(info.value.provider_message) == 500
    assert_no_key_fragment(str(info.value), info.value.provider_message)


def test_key_across_the_cut_of_an_anthropic_stream_error_is_redacted(make_provider):
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "m" * 495 + API_KEY}}
    provider, _ = make_provider(AnthropicProvider, Recorder(sse(("error", error))))
    with pytest.raises(ProviderUnavailableError) as info:
        list(provider.stream(HELLO))
    assert_no_key_fragment(str(info.value), info.value.provider_message)


# Retry-After beyond MAX_RETRY_AFTER ----------------------------------------------


def rate_limited(seconds: str) -> httpx.Response:
    return httpx.Response(
        429, json={"error": {"message": "slow down"}}, headers={"retry-after": seconds}
    )


def test_a_retry_after_beyond_the_default_maximum_is_raised_at_once(make_provider):
    recorder = Recorder(rate_limited("61"), httpx.Response(200, json=OPENAI_OK))
    provider, sleeps = make_provider(OpenAIProvider, recorder)
    with pytest.raises(RateLimitError) as info:
        provider.complete(HELLO)
    assert str(info.value) == (
        "openai returned HTTP 429: slow down (the provider asked to wait 61s, "
        "more than MAX_RETRY_AFTER=60s, so it was not retried)"
    )
    assert (info.value.retry_after, info.value.status_code) == (61.0, 429)
    assert info.value.provider_message == "slow down"
    assert len(recorder.requests) == 1
    assert sleeps == []


def test_max_retry_after_is_configurable(make_provider):
    recorder = Recorder(rate_limited("7"), rate_limited("3"), httpx.Response(200, json=OPENAI_OK))
    provider, sleeps = make_provider(OpenAIProvider, recorder, max_retry_after=5, cache=False)
    with pytest.raises(RateLimitError, match="asked to wait 7s, more than MAX_RETRY_AFTER=5s"):
        provider.complete(HELLO)
    assert provider.complete(HELLO).content == "ok"  # 3 s is waited for
    assert sleeps == [3.0]
    assert (
        recorder.requests[1].content
        == recorder.requests[2].content
        == (b'{"model":"test-model","messages":[{"role":"user","content":"hello"}]}')
    )


def test_a_long_retry_after_with_no_retries_left_is_raised_as_is(make_provider):
    recorder = Recorder(rate_limited("600"))
    provider, _ = make_provider(OpenAIProvider, recorder, max_retries=0)
    with pytest.raises(RateLimitError) as info:
        provider.complete(HELLO)
    assert str(info.value) == "openai returned HTTP 429: slow down"


# Storable output ------------------------------------------------------------------

ARGUMENT_CASES = {
    "nul": '{"q": "a\\u0000b"}',
    "nul in a key": '{"\\u0000": 1}',
    "lone surrogate": '{"q": "\\ud800"}',
    "1e400": '{"n": 1e400}',
    "NaN": '{"n": NaN}',
    "Infinity": '{"n": [-Infinity]}',
}
DIRTY_TEXT = "a\x00b\ud800c"  # sent JSON-escaped: "a\u0000b\ud800c"
CLEAN_TEXT = "a\ufffdb\ufffdc"


def _with_raw_arguments(template: dict[str, Any], arguments: str) -> bytes:
    # The arguments go into the body as JSON text, not as a Python value.
    return json.dumps(template).replace('"@ARGS@"', arguments).encode()


def whole_body(
    adapter: type[Provider],
    text: str,
    arguments: str,
    call_id: str = "call_\x00z",
    name: str = "lookup\ud800",
) -> bytes:
    if adapter is OpenAIProvider:
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        call["function"]["arguments"] = arguments  # OpenAI sends arguments as a string
        message = {"role": "assistant", "content": text, "tool_calls": [call]}
        return json.dumps(
            {"model": "m", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        ).encode()
    if adapter is AnthropicProvider:
        template: dict[str, Any] = {
            "model": "c",
            "content": [
                {"type": "text", "text": text},
                {"type": "tool_use", "id": call_id, "name": name, "input": "@ARGS@"},
            ],
            "stop_reason": "tool_use",
        }
    elif adapter is GeminiProvider:
        parts = [{"text": text}, {"functionCall": {"id": call_id, "name": name, "args": "@ARGS@"}}]
        template = {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]
        }
    else:
        call = {"id": call_id, "function": {"name": name, "arguments": "@ARGS@"}}
        template = {
            "model": "l",
            "message": {"role": "assistant", "content": text, "tool_calls": [call]},
            "done": True,
            "done_reason": "stop",
        }
    return _with_raw_arguments(template, arguments)


def stream_body(adapter: type[Provider], text: str, arguments: str) -> bytes:
    call_id, name = "call_\x00z", "lookup\ud800"
    if adapter is OpenAIProvider:
        fragment = {
            "index": 0,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        chunks = [openai_chunk({"content": text}), openai_chunk({"tool_calls": [fragment]})]
        lines = [f"data: {json.dumps(c)}\n\n" for c in chunks]
        lines += [f"data: {json.dumps(openai_chunk({}, 'tool_calls'))}\n\n", "data: [DONE]\n\n"]
        return "".join(lines).encode()
    if adapter is AnthropicProvider:
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": {"model": "c", "usage": {}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": arguments},
            },
            {"type": "content_block_stop", "index": 1},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
            {"type": "message_stop"},
        ]
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    if adapter is GeminiProvider:
        return b"data: " + whole_body(adapter, text, arguments) + b"\n\n"
    return whole_body(adapter, text, arguments) + b"\n"


def assert_storable(response: CompletionResponse) -> None:
    """What a JSON or text column on any database accepts."""
    stored = [response.content, [call.to_stored() for call in response.tool_calls]]
    encoded = json.dumps(stored, ensure_ascii=False, allow_nan=False)
    encoded.encode("utf-8")  # no lone surrogate
    assert "\x00" not in encoded


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("case", ARGUMENT_CASES)
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_output_is_made_storable(make_provider, adapter, case, streamed):
    arguments = ARGUMENT_CASES[case]
    build = stream_body if streamed else whole_body
    recorder = Recorder(httpx.Response(200, content=build(adapter, DIRTY_TEXT, arguments)))
    provider, _ = make_provider(adapter, recorder)
    if streamed:
        events = list(provider.stream(HELLO))
        response = events[-1].response
        assert [e.text for e in events if isinstance(e, TextDelta)] == [CLEAN_TEXT]
        assert [e.tool_call for e in events if isinstance(e, ToolCallCompleted)] == list(
            response.tool_calls
        )
    else:
        response = provider.complete(HELLO)
    assert response.sanitized
    assert response.content == CLEAN_TEXT
    (call,) = response.tool_calls
    assert (call.id, call.name) == ("call_\ufffdz", "lookup\ufffd")
    assert call.malformed  # answered with an error result by the loop
    assert call.arguments == {}
    if adapter is OpenAIProvider or (adapter is AnthropicProvider and streamed):
        assert call.raw_arguments == arguments  # the text exactly as received
    else:
        # Sent decoded: kept as JSON text with every non-ASCII character escaped.
        assert call.raw_arguments == json.dumps(json.loads(arguments))
    assert_storable(response)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_storable_output_is_not_flagged(make_provider, adapter):
    text = "caf\u00e9 \U0001f600"
    body = whole_body(adapter, text, '{"q": "\\u00e9", "n": 1.5e300}', "call_1", "lookup")
    provider, _ = make_provider(adapter, Recorder(httpx.Response(200, content=body)))
    response = provider.complete(HELLO)
    assert not response.sanitized
    assert response.content == "caf\u00e9 \U0001f600"
    (call,) = response.tool_calls
    assert call == ToolCall("call_1", "lookup", {"q": "\u00e9", "n": 1.5e300})


def test_unparseable_arguments_with_a_nul_character_are_kept_storable(make_provider):
    reply = openai_text("")
    reply["choices"][0]["message"]["tool_calls"] = [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q": "\x00'}}
    ]
    provider, _ = make_provider(OpenAIProvider, Recorder(httpx.Response(200, json=reply)))
    response = provider.complete(HELLO)
    assert response.tool_calls[0].raw_arguments == '{"q": "\ufffd'
    assert response.sanitized
    assert_storable(response)


class OneByteAtATime(httpx.SyncByteStream):
    def __init__(self, content: bytes) -> None:
        self.content = content

    def __iter__(self) -> Iterator[bytes]:
        for index in range(len(self.content)):
            yield self.content[index : index + 1]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_stream_lines_split_across_reads(make_provider, newline):
    chunks = [openai_chunk({"content": "caf\u00e9 \U0001f600"}), openai_chunk({}, "stop")]
    text = "".join(f"data: {json.dumps(c, ensure_ascii=False)}{newline}{newline}" for c in chunks)
    body = OneByteAtATime((text + f"data: [DONE]{newline}{newline}").encode())
    provider, _ = make_provider(OpenAIProvider, Recorder(httpx.Response(200, stream=body)))
    events = list(provider.stream(HELLO))
    assert events[0] == TextDelta("caf\u00e9 \U0001f600")
    assert events[-1].response.content == "caf\u00e9 \U0001f600"
