"""Real recorded thinking replies (Anthropic, Gemini) read and replayed by our adapters.

Each recording (shared/recorded/, sources in recorded/SOURCES.md) is served
back at the HTTP boundary. The reasoning the adapter keeps is compared with
what the recording holds, read here independently; where the recording has the
next request, whose reply the provider accepted, the turn we send back must
carry the same reasoning in the same place.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx

from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.providers import (
    AnthropicProvider,
    GeminiProvider,
    OpenAIProvider,
    ResponseCompleted,
)

from .recordings import cassette, interactions, load, served


def exchanges(name: str) -> list[dict[str, Any]]:
    return load(cassette(name))


def mistral(response: dict[str, Any]) -> OpenAIProvider:
    return OpenAIProvider(
        model="magistral-medium-latest",
        api_key="recorded",
        base_url="https://api.mistral.ai/v1",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(lambda _request: served(response))),
    )


class Replay:
    """Serves a cassette's responses in order and keeps our requests."""

    def __init__(self, name: str) -> None:
        self.recorded = exchanges(name)
        self.sent: list[dict[str, Any]] = []
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.sent.append(json.loads(request.content))
        return served(self.recorded[len(self.sent) - 1]["response"])

    def provider(self, cls: type, model: str, **options: Any) -> Any:
        return cls(
            model=model,
            api_key="recorded",
            max_retries=0,
            http_client=httpx.Client(transport=httpx.MockTransport(self)),
            **options,
        )


def recorded_request(replay: Replay, index: int) -> dict[str, Any]:
    body: dict[str, Any] = replay.recorded[index]["request"]["parsed_body"]
    return body


def sse_events(body: str) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data:").strip())
        for line in body.splitlines()
        if line.startswith("data:") and line.removeprefix("data:").strip() != "[DONE]"
    ]


NO_PARAMETERS = ToolSpec("get_user_country", "", {"type": "object", "properties": {}})


def test_anthropic_thinking_with_a_tool_call_is_sent_back_as_anthropic_accepted_it() -> None:
    replay = Replay("test_anthropic_tool_with_thinking.yaml")
    question = recorded_request(replay, 0)["messages"][0]["content"][0]["text"]
    provider = replay.provider(
        AnthropicProvider, "claude-sonnet-4-0", thinking={"type": "enabled", "budget_tokens": 3000}
    )
    history = [ChatMessage.user(question)]
    first = provider.complete(history, tools=[NO_PARAMETERS])
    thinking = recorded_request(replay, 1)["messages"][1]["content"][0]
    assert first.reasoning == (
        Reasoning("anthropic", ReasoningKind.THINKING, thinking["thinking"], thinking["signature"]),
    )
    (call,) = first.tool_calls
    history += [first.to_message(), ChatMessage.tool_result(call.id, "Mexico")]
    final = provider.complete(history, tools=[NO_PARAMETERS])
    # The assistant turn of the request Anthropic answered with 200, block for block.
    assert replay.sent[1]["messages"][1] == recorded_request(replay, 1)["messages"][1]
    answer = replay.recorded[1]["response"]["parsed_body"]["content"]
    assert final.content == "".join(b["text"] for b in answer if b["type"] == "text")


def test_anthropic_redacted_thinking_is_sent_back_verbatim() -> None:
    replay = Replay("test_anthropic_model_thinking_part_redacted.yaml")
    question = recorded_request(replay, 0)["messages"][0]["content"][0]["text"]
    follow_up = recorded_request(replay, 1)["messages"][2]["content"][0]["text"]
    provider = replay.provider(
        AnthropicProvider,
        "claude-sonnet-4-5-20250929",
        thinking={"type": "enabled", "budget_tokens": 1024},
        cache=False,  # the recording was made without prompt caching
    )
    first = provider.complete([ChatMessage.user(question)])
    recorded = replay.recorded[0]["response"]["parsed_body"]["content"]
    assert first.reasoning == tuple(
        Reasoning("anthropic", ReasoningKind.REDACTED, data=b["data"])
        for b in recorded
        if b["type"] == "redacted_thinking"
    )
    provider.complete([ChatMessage.user(question), first.to_message(), ChatMessage.user(follow_up)])
    assert replay.sent[1]["messages"] == recorded_request(replay, 1)["messages"]


def test_anthropic_streamed_redacted_and_signed_thinking_are_kept() -> None:
    for name, model in (
        ("test_anthropic_model_thinking_part_redacted_stream.yaml", "claude-sonnet-4-5-20250929"),
        ("test_anthropic_model_thinking_part_stream.yaml", "claude-sonnet-4-0"),
    ):
        replay = Replay(name)
        question = recorded_request(replay, 0)["messages"][0]["content"][0]["text"]
        provider = replay.provider(AnthropicProvider, model)
        final = list(provider.stream([ChatMessage.user(question)]))[-1]
        assert isinstance(final, ResponseCompleted)
        expected: dict[int, dict[str, Any]] = {}
        for event in sse_events(replay.recorded[0]["response"]["body"]["string"]):
            if event["type"] == "content_block_start":
                expected[event["index"]] = dict(event["content_block"])
            elif event["type"] == "content_block_delta":
                block, delta = expected[event["index"]], event["delta"]
                for key in ("thinking", "signature"):
                    if key in delta:
                        block[key] = block.get(key, "") + delta[key]
        parts = tuple(
            Reasoning("anthropic", ReasoningKind.THINKING, b["thinking"], b["signature"])
            if b["type"] == "thinking"
            else Reasoning("anthropic", ReasoningKind.REDACTED, data=b["data"])
            for _, b in sorted(expected.items())
            if b["type"] in ("thinking", "redacted_thinking")
        )
        assert parts
        assert final.response.reasoning == parts


def same_signature(ours: str, recorded: str) -> bool:
    # The recording's client sent the signature's bytes back in URL-safe base64.
    return base64.b64decode(ours) == base64.urlsafe_b64decode(recorded)


def test_gemini_thought_and_text_signature_go_back_on_their_parts() -> None:
    replay = Replay("test_google_model_thinking_part.yaml")
    first_request = recorded_request(replay, 0)
    question = first_request["contents"][0]["parts"][0]["text"]
    system = first_request["systemInstruction"]["parts"][0]["text"]
    provider = replay.provider(GeminiProvider, "gemini-3-pro-preview")
    history = [ChatMessage.system(system), ChatMessage.user(question)]
    first = provider.complete(history)
    parts = replay.recorded[0]["response"]["parsed_body"]["candidates"][0]["content"]["parts"]
    thought = next(p for p in parts if p.get("thought"))
    signed_text = next(p for p in parts if not p.get("thought") and "thoughtSignature" in p)
    assert first.reasoning == (
        Reasoning("gemini", ReasoningKind.THINKING, thought["text"]),
        Reasoning("gemini", ReasoningKind.SIGNATURE, data=signed_text["thoughtSignature"]),
    )
    assert thought["text"] not in first.content
    follow_up = recorded_request(replay, 1)["contents"][2]["parts"][0]["text"]
    provider.complete([*history, first.to_message(), ChatMessage.user(follow_up)])
    ours = replay.sent[1]["contents"][1]["parts"]
    theirs = recorded_request(replay, 1)["contents"][1]["parts"]
    assert [set(p) for p in ours] == [set(p) for p in theirs]
    assert ours[0] == {"text": thought["text"], "thought": True}
    assert ours[1]["thoughtSignature"] == signed_text["thoughtSignature"]
    assert same_signature(ours[1]["thoughtSignature"], theirs[1]["thoughtSignature"])


def test_gemini_streamed_call_signature_goes_back_on_the_call_without_the_dummy() -> None:
    replay = Replay("test_google_streaming_tool_call_thought_signature.yaml")
    question = recorded_request(replay, 0)["contents"][0]["parts"][0]["text"]
    tool = ToolSpec("get_country", "", {"type": "object", "properties": {}})
    provider = replay.provider(GeminiProvider, "gemini-3-pro-preview")
    history = [ChatMessage.user(question)]
    first = list(provider.stream(history, tools=[tool]))[-1]
    assert isinstance(first, ResponseCompleted)
    (call,) = first.response.tool_calls
    events = sse_events(replay.recorded[0]["response"]["body"]["string"])
    signature = events[0]["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    assert first.response.reasoning == (
        Reasoning("gemini", ReasoningKind.SIGNATURE, data=signature, call_id=call.id),
    )
    history += [first.response.to_message(), ChatMessage.tool_result(call.id, "Mexico")]
    final = list(provider.stream(history, tools=[tool]))[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.content == "The capital of Mexico is Mexico City."
    (part,) = replay.sent[1]["contents"][1]["parts"]
    (theirs,) = recorded_request(replay, 1)["contents"][1]["parts"]
    assert part["thoughtSignature"] == signature
    assert same_signature(part["thoughtSignature"], theirs["thoughtSignature"])


def thinking_chunks(content: Any) -> str:
    """The text of Mistral's thinking chunks, read from the recording."""
    return "".join(
        piece["text"]
        for part in (content if isinstance(content, list) else ())
        if part.get("type") == "thinking"
        for piece in part["thinking"]
        if piece.get("type") == "text"
    )


def test_magistral_thinking_chunks_are_kept_as_reasoning_streamed_or_not() -> None:
    (exchange,) = interactions("test_mistral_model_thinking_part.yaml", "api.mistral.ai")
    content = exchange["response"]["parsed_body"]["choices"][0]["message"]["content"]
    reply = mistral(exchange["response"]).complete([ChatMessage.user("Cross the river?")])
    assert reply.reasoning == (
        Reasoning("openai", ReasoningKind.THINKING, thinking_chunks(content)),
    )
    assert thinking_chunks(content) not in reply.content
    (exchange,) = interactions("test_mistral_model_thinking_part_iter.yaml", "api.mistral.ai")
    deltas = [
        chunk["choices"][0]["delta"].get("content")
        for chunk in sse_events(exchange["response"]["body"]["string"])
        if chunk.get("choices")
    ]
    expected = "".join(thinking_chunks(delta) for delta in deltas)
    final = list(mistral(exchange["response"]).stream([ChatMessage.user("Cross the street?")]))[-1]
    assert isinstance(final, ResponseCompleted)
    assert expected
    assert final.response.reasoning == (Reasoning("openai", ReasoningKind.THINKING, expected),)
