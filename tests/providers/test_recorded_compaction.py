"""Real recorded compaction exchanges (Anthropic) read and replayed by our adapters.

The recordings (shared/recorded/ and shared/recorded-compaction/, sources in
recorded/SOURCES.md) are served back at the HTTP boundary. The compacted state
the adapter keeps is compared with what the recording holds; where the recording
has the next request, which the provider accepted, ours must be the same.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind
from llm_conversations.core.reasoning import compactions, thoughts
from llm_conversations.providers import (
    AnthropicProvider,
    OpenAIResponsesProvider,
    ResponseCompleted,
)
from llm_conversations.providers.base import Provider

from .test_recorded_reasoning import Replay, recorded_request, sse_events


def without_stream(body: dict[str, Any]) -> dict[str, Any]:
    """A recorded body less ``stream: false`` (we send ``stream`` only when true)."""
    return {key: value for key, value in body.items() if not (key == "stream" and not value)}


def straight(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Input items with typographic punctuation made plain: the streamed recording's
    later requests hold its replies' text so (the stream sent curly quotes and dashes)."""
    text = json.dumps(items, ensure_ascii=False)
    for typographic, plain in PLAIN.items():
        text = text.replace(typographic, plain)
    return json.loads(text)  # type: ignore[no-any-return]


PLAIN = {"\u2019": "'", "\u2018": "'", "\u2014": "--", "\u2013": "-"}


def anthropic(replay: Replay, model: str, **options: Any) -> AnthropicProvider:
    provider: AnthropicProvider = replay.provider(
        AnthropicProvider, model, compaction=True, **options
    )
    return provider


# OpenAI's server-side compaction over four rounds, whole and streamed.
STATEFUL = (
    "test_openai_responses_compact_stateful_mode.yaml",
    "test_openai_responses_compact_stateful_mode_stream.yaml",
)


def answer(provider: Provider, history: list[ChatMessage], *, streamed: bool) -> CompletionResponse:
    """The reply to ``history``, streamed as the recording's request was or whole."""
    if not streamed:
        return provider.complete(history)
    final = list(provider.stream(history))[-1]
    assert isinstance(final, ResponseCompleted)
    return final.response


def recorded_compaction(replay: Replay, index: int) -> Reasoning:
    """The compaction block of the recorded reply ``index``, as the part it is kept as."""
    content = replay.recorded[index]["response"]["parsed_body"]["content"]
    (block,) = (b for b in content if b["type"] == "compaction")
    return Reasoning("anthropic", ReasoningKind.COMPACTION, block["content"])


# The request of the round trip, byte for byte: ``messages`` last (the cache prefix).
ROUND_TRIP_BYTES = (
    b'{"model":"claude-sonnet-4-6","max_tokens":4096,"system":"Be brief.",'
    b'"context_management":{"edits":[{"type":"compact_20260112"}]},"messages":['
    b'{"role":"user","content":[{"type":"text","text":"Hello!"}]},'
    b'{"role":"assistant","content":[{"type":"compaction","content":"Summary: user said hello."},'
    b'{"type":"text","text":"Hello! How can I help?"}]},'
    b'{"role":"user","content":[{"type":"text","text":"What did I say earlier?"},'
    b'{"type":"text","text":"What did I say earlier?"}]}]}'
)


def test_a_compacted_turn_is_sent_back_as_anthropic_accepted_it() -> None:
    replay = Replay("test_anthropic_compaction_round_trip.yaml")
    recorded = recorded_request(replay, 0)
    compaction, text = recorded["messages"][1]["content"]
    question = recorded["messages"][2]["content"][0]["text"]
    provider = anthropic(replay, recorded["model"], cache=False)
    turn = ChatMessage.assistant(
        text["text"],
        reasoning=[Reasoning("anthropic", ReasoningKind.COMPACTION, compaction["content"])],
    )
    history = [ChatMessage.user("Hello!"), turn, ChatMessage.user(question)]
    # The recording's last user turn holds the question twice.
    reply = provider.complete(
        [*history, ChatMessage.user(question)], parameters={"instructions": recorded["system"]}
    )
    assert replay.sent[0] == without_stream(recorded)
    assert replay.requests[0].content == ROUND_TRIP_BYTES
    assert replay.requests[0].headers["anthropic-beta"] == "compact-2026-01-12"
    assert reply.content == replay.recorded[0]["response"]["parsed_body"]["content"][0]["text"]
    assert reply.reasoning == ()


def test_a_compaction_is_kept_and_replayed_end_to_end() -> None:
    replay = Replay("test_anthropic_compaction_end_to_end.yaml")
    first, second = recorded_request(replay, 0), recorded_request(replay, 1)
    provider = anthropic(
        replay,
        first["model"],
        cache=False,
        context_management=first["context_management"],  # the recording's trigger
    )
    history = [ChatMessage.user(first["messages"][0]["content"][0]["text"])]
    instructions = {"instructions": first["system"]}
    reply = provider.complete(history, parameters=instructions)
    assert replay.sent[0] == without_stream(first)
    assert reply.reasoning == (recorded_compaction(replay, 0),)
    assert thoughts(reply.reasoning) == []
    assert reply.content == "Hello! 👋"
    # Both steps are billed: the compaction (the whole input read) and the answer.
    steps = replay.recorded[0]["response"]["parsed_body"]["usage"]["iterations"]
    assert [step["type"] for step in steps] == ["compaction", "message"]
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (
        sum(step["input_tokens"] for step in steps),
        sum(step["output_tokens"] for step in steps),
    )
    follow_up = second["messages"][2]["content"][0]["text"]
    provider.complete(
        [*history, reply.to_message(), ChatMessage.user(follow_up)], parameters=instructions
    )
    # The compacted turn goes back block for block: the state, then the text.
    assert replay.sent[1] == without_stream(second)


CACHED = (
    "test_anthropic_compaction_usage_with_cache.yaml",
    "test_anthropic_compaction_usage_with_cache_streaming.yaml",
)


@pytest.mark.parametrize("name", CACHED)
def test_a_compaction_beside_prompt_caching_is_read_whole_and_streamed(name: str) -> None:
    replay = Replay(name)
    recorded = recorded_request(replay, 0)
    provider = anthropic(replay, recorded["model"])
    history = [ChatMessage.user(recorded["messages"][0]["content"][0]["text"])]
    reply = answer(provider, history, streamed=recorded["stream"])
    if recorded["stream"]:
        events = sse_events(replay.recorded[0]["response"]["body"]["string"])
        state = "".join(
            e["delta"]["content"]
            for e in events
            if e["type"] == "content_block_delta" and e["delta"]["type"] == "compaction_delta"
        )
        assert compactions(reply.reasoning, "anthropic") == [
            Reasoning("anthropic", ReasoningKind.COMPACTION, state)
        ]
    else:
        assert reply.reasoning == (recorded_compaction(replay, 0),)
    assert replay.sent[0]["context_management"] == {"edits": [{"type": "compact_20260112"}]}
    assert reply.content.startswith("Hello")


@pytest.mark.parametrize("name", STATEFUL)
def test_openai_compaction_items_are_kept_and_sent_back_as_openai_accepted_them(name: str) -> None:
    replay = Replay(name)
    first = recorded_request(replay, 0)
    provider: OpenAIResponsesProvider = replay.provider(
        OpenAIResponsesProvider,
        first["model"],
        compaction=True,
        context_management=first["context_management"],  # the recording's threshold
    )
    history: list[ChatMessage] = []
    for index, interaction in enumerate(replay.recorded):
        recorded = interaction["request"]["parsed_body"]
        history.append(ChatMessage.user(recorded["input"][-1]["content"]))
        reply = answer(provider, history, streamed=recorded["stream"])
        sent = replay.sent[index]
        assert sent["context_management"] == recorded["context_management"]
        # Every item as OpenAI accepted it, the compaction item in its place.
        assert straight(sent["input"]) == straight(recorded["input"])
        history.append(reply.to_message())
    made = [part for m in history for part in compactions(m.reasoning, "openai_responses")]
    assert len(made) == 1
    assert thoughts(made) == []
