"""Reasoning state: read from each provider's replies, replayed only to its maker.

Request bodies are pinned byte for byte at the HTTP boundary for a thinking +
tools round trip: the reply is parsed, its turn and the tool result are sent
back, and the next request must carry the reasoning exactly where the
provider's documentation wants it (docs/providers.md), and nowhere else.
"""

from __future__ import annotations

import json

import httpx
import pytest

from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind, ToolCall
from llm_conversations.providers import (
    AnthropicProvider,
    GeminiProvider,
    OllamaProvider,
    OpenAIProvider,
    ResponseCompleted,
)
from llm_conversations.providers.errors import InvalidResponseError
from llm_conversations.providers.gemini_contents import SKIP_SIGNATURE

from .conftest import TOOLS, Recorder, sse

QUESTION = ChatMessage.user("Weather in Paris?")
THINKING = {"type": "enabled", "budget_tokens": 2048}

ANTHROPIC_THINKING_REPLY = {
    "id": "msg_t",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "thinking", "thinking": "The user wants weather.", "signature": "sig-A=="},
        {"type": "redacted_thinking", "data": "REDACTED-B"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 40, "output_tokens": 12},
}
ANTHROPIC_FINAL = {
    "id": "msg_f",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "18C."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 60, "output_tokens": 3},
}

# The exact bytes of the second request of the round trip: the thinking blocks
# first, unmodified and in their order, then the text and the call; prompt-cache
# breakpoints on the last tool and on the tool result, never on a thinking block.
ANTHROPIC_ROUND_TRIP = (
    '{"model":"claude-sonnet-4-5","max_tokens":4096,'
    '"tools":[{"name":"get_weather","description":"Current weather","input_schema":'
    '{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},'
    '{"name":"get_time","description":"Current time","input_schema":'
    '{"type":"object","properties":{}},"cache_control":{"type":"ephemeral"}}],'
    '"thinking":{"type":"enabled","budget_tokens":2048},"messages":['
    '{"role":"user","content":[{"type":"text","text":"Weather in Paris?"}]},'
    '{"role":"assistant","content":['
    '{"type":"thinking","thinking":"The user wants weather.","signature":"sig-A=="},'
    '{"type":"redacted_thinking","data":"REDACTED-B"},'
    '{"type":"text","text":"Let me look."},'
    '{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},'
    '{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C",'
    '"cache_control":{"type":"ephemeral"}}]}]}'
)


def make(cls, recorder, **options):
    return cls(
        http_client=httpx.Client(transport=httpx.MockTransport(recorder)),
        api_key="k",
        max_retries=0,
        **options,
    )


def compact(content: bytes) -> str:
    return json.dumps(json.loads(content), separators=(",", ":"), ensure_ascii=False)


def anthropic_parts() -> tuple[Reasoning, ...]:
    return (
        Reasoning("anthropic", ReasoningKind.THINKING, "The user wants weather.", "sig-A=="),
        Reasoning("anthropic", ReasoningKind.REDACTED, data="REDACTED-B"),
    )


def test_anthropic_reply_keeps_thinking_and_redacted_blocks_in_order():
    recorder = Recorder(httpx.Response(200, json=ANTHROPIC_THINKING_REPLY))
    provider = make(AnthropicProvider, recorder, model="claude-sonnet-4-5", thinking=THINKING)
    response = provider.complete([QUESTION], tools=TOOLS)
    assert response.content == "Let me look."
    assert response.reasoning == anthropic_parts()
    turn = response.to_message()
    assert turn.reasoning == anthropic_parts()
    assert "wants weather" not in turn.content  # never turned into visible text


def test_anthropic_round_trip_request_bytes_carry_the_thinking_blocks():
    recorder = Recorder(
        httpx.Response(200, json=ANTHROPIC_THINKING_REPLY),
        httpx.Response(200, json=ANTHROPIC_FINAL),
    )
    provider = make(AnthropicProvider, recorder, model="claude-sonnet-4-5", thinking=THINKING)
    first = provider.complete([QUESTION], tools=TOOLS)
    history = [QUESTION, first.to_message(), ChatMessage.tool_result("toolu_1", "18C")]
    final = provider.complete(history, tools=TOOLS)
    assert final.content == "18C."
    assert compact(recorder.requests[1].content) == ANTHROPIC_ROUND_TRIP


def test_anthropic_stream_assembles_thinking_and_signature_deltas():
    events = [
        ("message_start", {"type": "message_start", "message": {"model": "claude", "usage": {}}}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "The user "},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "wants weather."},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "sig-A=="},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "redacted_thinking", "data": "REDACTED-B"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather"},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": '{"city":"Paris"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 2}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    provider = make(AnthropicProvider, Recorder(sse(*events)), model="claude", thinking=THINKING)
    final = list(provider.stream([QUESTION], tools=TOOLS))[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.reasoning == anthropic_parts()
    assert final.response.tool_calls == (ToolCall("toolu_1", "get_weather", {"city": "Paris"}),)


def test_anthropic_streamed_thinking_counts_against_the_reply_limit():
    events = [
        ("message_start", {"type": "message_start", "message": {"model": "claude", "usage": {}}}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}},
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "x" * 50},
            },
        ),
    ]
    provider = make(AnthropicProvider, Recorder(sse(*events)), model="claude", max_reply_chars=10)
    with pytest.raises(InvalidResponseError, match="reasoning is longer than MAX_REPLY_CHARS"):
        list(provider.stream([QUESTION]))


def gemini_turn() -> ChatMessage:
    """A Gemini turn: a signed thought, a signed text and a signed call."""
    return ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_weather", {"city": "Paris"})],
        "Checking.",
        reasoning=[
            Reasoning("gemini", ReasoningKind.THINKING, "Need weather.", "sig-T"),
            Reasoning("gemini", ReasoningKind.SIGNATURE, data="sig-X"),
            Reasoning("gemini", ReasoningKind.SIGNATURE, data="sig-C", call_id="call_1"),
        ],
    )


GEMINI_REPLY = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Need weather.", "thought": True, "thoughtSignature": "sig-T"},
                    {"text": "Checking.", "thoughtSignature": "sig-X"},
                    {
                        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                        "thoughtSignature": "sig-C",
                    },
                ],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5},
    "modelVersion": "gemini-3-pro-preview",
}


def test_gemini_reply_keeps_each_signature_with_its_part():
    recorder = Recorder(httpx.Response(200, json=GEMINI_REPLY))
    provider = make(GeminiProvider, recorder, model="gemini-3-pro-preview")
    response = provider.complete([QUESTION], tools=TOOLS)
    assert response.content == "Checking."
    call_id = response.tool_calls[0].id
    assert response.reasoning == (
        Reasoning("gemini", ReasoningKind.THINKING, "Need weather.", "sig-T"),
        Reasoning("gemini", ReasoningKind.SIGNATURE, data="sig-X"),
        Reasoning("gemini", ReasoningKind.SIGNATURE, data="sig-C", call_id=call_id),
    )


def test_gemini_stream_joins_thought_pieces_and_keeps_the_call_signature():
    chunks = [
        {"candidates": [{"content": {"parts": [{"text": "Need ", "thought": True}]}}]},
        {
            "candidates": [
                {
                    "content": {
                        "parts": [
                            {"text": "weather.", "thought": True, "thoughtSignature": "sig-T"}
                        ]
                    }
                }
            ]
        },
        {
            "candidates": [
                {
                    "content": {
                        "parts": [
                            {
                                "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                                "thoughtSignature": "sig-C",
                            }
                        ]
                    }
                }
            ]
        },
        {"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "STOP"}]},
    ]
    provider = make(
        GeminiProvider,
        Recorder(sse(*((None, chunk) for chunk in chunks))),
        model="gemini-3-pro-preview",
    )
    final = list(provider.stream([QUESTION], tools=TOOLS))[-1]
    assert isinstance(final, ResponseCompleted)
    call_id = final.response.tool_calls[0].id
    assert final.response.reasoning == (
        Reasoning("gemini", ReasoningKind.THINKING, "Need weather.", "sig-T"),
        Reasoning("gemini", ReasoningKind.SIGNATURE, data="sig-C", call_id=call_id),
    )


def gemini_body(messages, model="gemini-3-pro-preview"):
    recorder = Recorder(httpx.Response(200, json=GEMINI_REPLY))
    make(GeminiProvider, recorder, model=model).complete(messages, tools=TOOLS)
    return compact(recorder.requests[0].content)


def test_gemini_round_trip_request_bytes_put_each_signature_back_on_its_part():
    history = [QUESTION, gemini_turn(), ChatMessage.tool_result("call_1", "18C")]
    # The conversation comes last (what a prompt cache compares is its start).
    assert gemini_body(history).endswith(
        ',"contents":[{"role":"user","parts":[{"text":"Weather in Paris?"}]},'
        '{"role":"model","parts":['
        '{"text":"Need weather.","thought":true,"thoughtSignature":"sig-T"},'
        '{"text":"Checking.","thoughtSignature":"sig-X"},'
        '{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},'
        '"thoughtSignature":"sig-C"}]},'
        '{"role":"user","parts":[{"functionResponse":{"name":"get_weather",'
        '"response":{"output":"18C"}}}]}]}'
    )


def test_gemini_dummy_signature_only_for_calls_gemini_did_not_sign():
    foreign = ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_weather", {"city": "Paris"}), ToolCall("call_2", "get_time")],
        reasoning=anthropic_parts(),
    )
    history = [QUESTION, foreign, ChatMessage.tool_result("call_1", "18C")]
    history.append(ChatMessage.tool_result("call_2", "noon"))
    body = json.loads(gemini_body(history))
    model_parts = body["contents"][1]["parts"]
    # Anthropic's thinking is not Gemini's: never sent, not even as text.
    assert model_parts == [
        {
            "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
            "thoughtSignature": SKIP_SIGNATURE,
        },
        {"functionCall": {"name": "get_time", "args": {}}},
    ]
    own = json.loads(gemini_body([QUESTION, gemini_turn(), ChatMessage.tool_result("call_1", "x")]))
    assert SKIP_SIGNATURE not in json.dumps(own)


def test_reasoning_never_reaches_another_provider():
    history = [QUESTION, gemini_turn(), ChatMessage.tool_result("call_1", "18C")]
    anthropic_turn = ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_weather", {"city": "Paris"})], reasoning=anthropic_parts()
    )
    secrets = ("sig-", "REDACTED-B", "Need weather", "wants weather")
    bodies = []
    recorder = Recorder(httpx.Response(200, json=ANTHROPIC_FINAL))
    make(AnthropicProvider, recorder, model="claude").complete(history, tools=TOOLS)
    bodies.append(recorder.requests[0].content.decode())
    other = [QUESTION, anthropic_turn, ChatMessage.tool_result("call_1", "18C")]
    for cls, reply in (
        (OpenAIProvider, {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}),
        (OllamaProvider, {"message": {"content": "ok"}, "done": True, "done_reason": "stop"}),
    ):
        for messages in (history, other):
            recorder = Recorder(httpx.Response(200, json=reply))
            make(cls, recorder, model="m").complete(messages, tools=TOOLS)
            bodies.append(recorder.requests[0].content.decode())
    recorder = Recorder(httpx.Response(200, json=GEMINI_REPLY))
    make(GeminiProvider, recorder, model="gemini-2.5-pro").complete(other, tools=TOOLS)
    bodies.append(recorder.requests[0].content.decode())
    for body in bodies:
        assert not any(secret in body for secret in secrets), body


OPENAI_CALL_REPLY = {
    "model": "deepseek-reasoner",
    "choices": [
        {
            "message": {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Weather needs a tool.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 7},
}
OPENAI_FINAL = {"choices": [{"message": {"content": "18C."}, "finish_reason": "stop"}]}


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_openai_compatible_reasoning_is_kept_and_not_sent_back(key):
    reply = json.loads(json.dumps(OPENAI_CALL_REPLY))
    message = reply["choices"][0]["message"]
    message[key] = message.pop("reasoning_content")
    recorder = Recorder(httpx.Response(200, json=reply), httpx.Response(200, json=OPENAI_FINAL))
    provider = make(
        OpenAIProvider, recorder, model="deepseek-reasoner", base_url="https://api.deepseek.com"
    )
    first = provider.complete([QUESTION], tools=TOOLS)
    assert first.reasoning == (
        Reasoning("openai", ReasoningKind.THINKING, "Weather needs a tool."),
    )
    assert first.content == ""
    provider.complete(
        [QUESTION, first.to_message(), ChatMessage.tool_result("call_1", "18C")], tools=TOOLS
    )
    # A compatible server gets no prompt_cache_key; the conversation comes last.
    assert compact(recorder.requests[1].content) == (
        '{"model":"deepseek-reasoner",'
        '"tools":[{"type":"function","function":{"name":"get_weather",'
        '"description":"Current weather","parameters":{"type":"object","properties":'
        '{"city":{"type":"string"}},"required":["city"]}}},{"type":"function","function":'
        '{"name":"get_time","description":"Current time","parameters":'
        '{"type":"object","properties":{}}}}],'
        '"messages":['
        '{"role":"user","content":"Weather in Paris?"},'
        '{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",'
        '"function":{"name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}}]},'
        '{"role":"tool","content":"18C","tool_call_id":"call_1"}]}'
    )


def test_openai_compatible_reasoning_content_is_replayed_on_call_turns_when_asked():
    recorder = Recorder(
        httpx.Response(200, json=OPENAI_CALL_REPLY), httpx.Response(200, json=OPENAI_FINAL)
    )
    provider = make(OpenAIProvider, recorder, model="deepseek-v4", replay_reasoning_content=True)
    first = provider.complete([QUESTION], tools=TOOLS)
    answered = ChatMessage.assistant("Done.", reasoning=first.reasoning)
    history = [QUESTION, first.to_message(), ChatMessage.tool_result("call_1", "18C")]
    provider.complete([*history, answered, ChatMessage.user("More?")], tools=TOOLS)
    body = json.loads(recorder.requests[1].content)
    assert "replay_reasoning_content" not in body
    assert body["messages"][1]["reasoning_content"] == "Weather needs a tool."
    # Only call turns carry it; a final answer's reasoning is not needed back.
    assert "reasoning_content" not in body["messages"][3]


def test_openai_compatible_streamed_reasoning_is_one_part():
    chunks = [
        {"choices": [{"index": 0, "delta": {"reasoning_content": "Weather "}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "needs a tool."}}]},
        {"choices": [{"index": 0, "delta": {"content": "Sunny."}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
        "[DONE]",
    ]
    provider = make(OpenAIProvider, Recorder(sse(*((None, c) for c in chunks))), model="m")
    final = list(provider.stream([QUESTION]))[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.content == "Sunny."
    assert final.response.reasoning == (
        Reasoning("openai", ReasoningKind.THINKING, "Weather needs a tool."),
    )


def test_ollama_thinking_is_kept_and_sent_back_to_ollama_only():
    reply = {
        "model": "qwen3",
        "message": {
            "role": "assistant",
            "content": "",
            "thinking": "Call the tool.",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        "done": True,
        "done_reason": "stop",
    }
    final = {"model": "qwen3", "message": {"content": "18C."}, "done": True, "done_reason": "stop"}
    recorder = Recorder(httpx.Response(200, json=reply), httpx.Response(200, json=final))
    provider = make(OllamaProvider, recorder, model="qwen3")
    first = provider.complete([QUESTION], tools=TOOLS)
    assert first.reasoning == (Reasoning("ollama", ReasoningKind.THINKING, "Call the tool."),)
    call_id = first.tool_calls[0].id
    provider.complete(
        [QUESTION, first.to_message(), ChatMessage.tool_result(call_id, "18C")], tools=TOOLS
    )
    sent = compact(recorder.requests[1].content)
    assert sent.startswith('{"model":"qwen3",')
    assert sent.endswith(
        ',"messages":[{"role":"user","content":"Weather in Paris?"},'
        '{"role":"assistant","content":"","thinking":"Call the tool.","tool_calls":'
        '[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},'
        '{"role":"tool","content":"18C","tool_name":"get_weather"}]}'
    )


def test_ollama_streamed_thinking_is_one_part():
    lines = [
        {"message": {"role": "assistant", "content": "", "thinking": "Call "}, "done": False},
        {"message": {"role": "assistant", "content": "", "thinking": "the tool."}, "done": False},
        {"message": {"role": "assistant", "content": "Hi"}, "done": False},
        {"model": "qwen3", "message": {"content": ""}, "done": True, "done_reason": "stop"},
    ]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    provider = make(OllamaProvider, Recorder(httpx.Response(200, content=body)), model="qwen3")
    final = list(provider.stream([QUESTION]))[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.reasoning == (
        Reasoning("ollama", ReasoningKind.THINKING, "Call the tool."),
    )


def test_anthropic_final_assistant_turn_drops_thinking_only_when_thinking_is_off():
    turn = ChatMessage.assistant("Partial", reasoning=anthropic_parts())
    for options, kept in (({}, False), ({"thinking": THINKING}, True)):
        recorder = Recorder(httpx.Response(200, json=ANTHROPIC_FINAL))
        make(AnthropicProvider, recorder, model="claude", **options).complete([QUESTION, turn])
        types = [block["type"] for block in recorder.body["messages"][-1]["content"]]
        assert types == (["thinking", "redacted_thinking", "text"] if kept else ["text"])
    # Earlier turns keep theirs either way.
    recorder = Recorder(httpx.Response(200, json=ANTHROPIC_FINAL))
    make(AnthropicProvider, recorder, model="claude").complete([QUESTION, turn, QUESTION])
    assert recorder.body["messages"][1]["content"][0]["type"] == "thinking"


def test_anthropic_thinking_waits_for_the_next_turn_when_the_tool_turn_came_from_elsewhere():
    foreign = ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_weather", {"city": "Paris"})],
        reasoning=[Reasoning("gemini", ReasoningKind.SIGNATURE, data="g", call_id="call_1")],
    )
    result = ChatMessage.tool_result("call_1", "18C")
    own = ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_weather", {"city": "Paris"})], reasoning=anthropic_parts()
    )

    def body(messages):
        recorder = Recorder(httpx.Response(200, json=ANTHROPIC_FINAL))
        make(AnthropicProvider, recorder, model="claude", thinking=THINKING).complete(messages)
        return recorder.body

    # Anthropic would refuse thinking here (the tool turn has no thinking block).
    assert "thinking" not in body([QUESTION, foreign, result])
    assert body([QUESTION, own, result])["thinking"] == THINKING
    # A new user turn starts a new assistant turn: thinking stays on.
    assert body([QUESTION, foreign, result, ChatMessage.assistant("ok"), QUESTION])["thinking"]
