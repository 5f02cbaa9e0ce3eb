"""The provider's compacted state: asked for by the ``compact`` strategy, kept as a
``compaction`` part, sent back only to the provider that made it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind
from llm_conversations.core.reasoning import thoughts
from llm_conversations.providers import (
    AnthropicProvider,
    GeminiProvider,
    OllamaProvider,
    OpenAIProvider,
    OpenAIResponsesProvider,
    build_provider,
)
from llm_conversations.providers.base import CompletionRequest, Provider

STATE = Reasoning("anthropic", ReasoningKind.COMPACTION, "Summary: the user said hello.")
HISTORY = (
    ChatMessage.user("Hello!"),
    ChatMessage.assistant("Hello! How can I help?", reasoning=[STATE]),
    ChatMessage.user("What did I say?"),
)


def body(provider: Provider, messages: tuple[ChatMessage, ...] = HISTORY) -> str:
    _path, sent = provider.build_request(
        CompletionRequest(messages, (), dict(provider.options), False, model="m")
    )
    return json.dumps(sent)


@pytest.mark.parametrize(
    "cls", [OpenAIProvider, OpenAIResponsesProvider, GeminiProvider, OllamaProvider]
)
def test_another_providers_compacted_state_is_never_sent(cls: type[Provider]) -> None:
    sent = body(cls(model="m", api_key="k", compaction=True))
    assert "the user said hello" not in sent
    assert "Hello! How can I help?" in sent  # the turn itself is sent as usual


def test_anthropic_asks_for_compaction_only_when_its_entry_compacts() -> None:
    plain = AnthropicProvider(model="m", api_key="k")
    assert "context_management" not in json.loads(body(plain))
    assert "anthropic-beta" not in plain.auth_headers()
    compacting = AnthropicProvider(model="m", api_key="k", compaction=True)
    sent = json.loads(body(compacting))
    assert sent["context_management"] == {"edits": [{"type": "compact_20260112"}]}
    assert list(sent)[-1] == "messages"  # the cached prefix ends before the turns
    assert sent["messages"][1]["content"][0] == {"type": "compaction", "content": STATE.text}
    assert compacting.auth_headers()["anthropic-beta"] == "compact-2026-01-12"


def test_the_entrys_context_management_is_kept_beside_the_compact_edit() -> None:
    clearing = {"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 3}}
    provider = AnthropicProvider(
        model="m", api_key="k", compaction=True, context_management={"edits": [clearing]}
    )
    edits = json.loads(body(provider))["context_management"]["edits"]
    assert edits == [clearing, {"type": "compact_20260112"}]


def test_the_compact_strategy_of_an_entry_turns_compaction_on_where_the_protocol_has_it() -> None:
    for backend, compacts in (("anthropic", True), ("openai", False)):
        entry = {"BACKEND": backend, "MODEL": "m", "API_KEY": "k", "CONTEXT_STRATEGY": "compact"}
        assert build_provider(entry).compaction is compacts
        assert build_provider({**entry, "CONTEXT_STRATEGY": "truncate"}).compaction is False


def test_a_compacted_state_is_never_shown_as_reasoning() -> None:
    thinking = Reasoning("anthropic", ReasoningKind.THINKING, "hmm", "sig")
    assert thoughts((STATE, thinking)) == [thinking]
    assert Reasoning.from_dict(STATE.to_stored()) == STATE


def test_an_empty_turn_that_carries_the_compacted_state_is_still_sent() -> None:
    sent: list[dict[str, Any]] = []

    def reply(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        text = {"type": "text", "text": "ok"}
        return httpx.Response(200, json={"content": [text], "stop_reason": "end_turn"})

    client = httpx.Client(transport=httpx.MockTransport(reply))
    empty = ChatMessage.assistant("", reasoning=[STATE])
    history = [ChatMessage.user("Hello!"), empty, ChatMessage.user("And now?")]
    AnthropicProvider(model="m", api_key="k", compaction=True, http_client=client).complete(history)
    assert sent[0]["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "compaction", "content": STATE.text}],
    }
    # Another provider's empty turn is left out as before.
    other = Reasoning("openai_responses", ReasoningKind.COMPACTION, data='{"id": "cmp_1"}')
    foreign = [ChatMessage.user("Hello!"), ChatMessage.assistant("", reasoning=[other])]
    AnthropicProvider(model="m", api_key="k", http_client=client).complete(
        [*foreign, ChatMessage.user("And now?")]
    )
    assert [turn["role"] for turn in sent[1]["messages"]] == ["user"]
