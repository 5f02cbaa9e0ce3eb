"""The rules of a turn's reasoning state (core/reasoning.py, ChatMessage.reasoning)."""

from __future__ import annotations

from typing import Any

import pytest

from llm_conversations.core.messages import (
    ChatMessage,
    InvalidMessage,
    Reasoning,
    ReasoningKind,
    ToolCall,
)
from llm_conversations.core.reasoning import (
    MAX_REASONING_CHARS,
    MAX_REASONING_PARTS,
    bounded_reasoning,
)

THOUGHT = {"provider": "anthropic", "kind": "thinking", "text": "t", "data": "sig"}


def assistant(reasoning: Any, **extra: Any) -> ChatMessage:
    return ChatMessage.from_dict(
        {"role": "assistant", "content": "a", "reasoning": reasoning, **extra}
    )


def test_stored_form_round_trips_and_keeps_only_set_keys() -> None:
    parts = [
        THOUGHT,
        {"provider": "anthropic", "kind": "redacted", "data": "opaque"},
        {"provider": "x", "kind": "summary", "text": "in short"},
        {"provider": "x", "kind": "encrypted", "data": "enc"},
    ]
    message = assistant(parts)
    assert message.to_stored()["reasoning"] == parts
    assert ChatMessage.from_dict(message.to_stored()) == message
    # Not part of the Chat Completions form, and never of the text.
    assert "reasoning" not in message.to_wire()
    assert message.content == "a"
    assert "reasoning" not in ChatMessage.assistant("a").to_stored()


@pytest.mark.parametrize(
    ("data", "code", "field"),
    [
        (
            {"role": "user", "content": "q", "reasoning": [THOUGHT]},
            "reasoning_not_allowed",
            "reasoning",
        ),
        (
            {"role": "system", "content": "s", "reasoning": [THOUGHT]},
            "reasoning_not_allowed",
            "reasoning",
        ),
        ({"role": "assistant", "content": "a", "reasoning": []}, "empty_reasoning", "reasoning"),
        (
            {"role": "assistant", "content": "a", "reasoning": "text"},
            "invalid_reasoning",
            "reasoning",
        ),
        (
            {"role": "assistant", "content": "a", "reasoning": [{**THOUGHT, "x": 1}]},
            "unknown_field",
            "reasoning[0].x",
        ),
        (
            {"role": "assistant", "content": "a", "reasoning": [{**THOUGHT, "provider": ""}]},
            "invalid_reasoning",
            "reasoning[0].provider",
        ),
        (
            {"role": "assistant", "content": "a", "reasoning": [{**THOUGHT, "kind": "dream"}]},
            "invalid_reasoning",
            "reasoning[0].kind",
        ),
        (
            {"role": "assistant", "content": "a", "reasoning": [{**THOUGHT, "text": 3}]},
            "invalid_reasoning",
            "reasoning[0].text",
        ),
        (
            {"role": "assistant", "content": "a", "reasoning": [{**THOUGHT, "data": ""}]},
            "invalid_reasoning",
            "reasoning[0].data",
        ),
        (
            {
                "role": "assistant",
                "content": "a",
                "reasoning": [{"provider": "p", "kind": "thinking"}],
            },
            "invalid_reasoning",
            "reasoning[0].text",
        ),
        (
            {
                "role": "assistant",
                "content": "a",
                "reasoning": [{"provider": "p", "kind": "redacted"}],
            },
            "invalid_reasoning",
            "reasoning[0].data",
        ),
        (
            {
                "role": "assistant",
                "content": "a",
                "reasoning": [{"provider": "p", "kind": "redacted", "data": "d", "text": "t"}],
            },
            "invalid_reasoning",
            "reasoning[0].text",
        ),
        (
            {"role": "assistant", "content": "a", "reasoning": [{**THOUGHT, "call_id": "c"}]},
            "invalid_reasoning",
            "reasoning[0].call_id",
        ),
        (
            {
                "role": "assistant",
                "content": "a",
                "reasoning": [{"provider": "p", "kind": "signature", "data": "s", "call_id": "c"}],
            },
            "invalid_reasoning",
            "reasoning[0].call_id",
        ),
    ],
)
def test_each_rule_names_its_code_and_field(data: dict[str, Any], code: str, field: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        ChatMessage.from_dict(data)
    assert (info.value.code, info.value.field) == (code, field)


def test_a_signature_names_a_call_of_its_own_turn() -> None:
    message = ChatMessage.assistant_tool_calls(
        [ToolCall("c1", "f")],
        reasoning=[Reasoning("gemini", ReasoningKind.SIGNATURE, data="s", call_id="c1")],
    )
    assert message.reasoning is not None
    assert message.reasoning[0].call_id == "c1"
    # A signature without a call belongs to the text.
    assert assistant([{"provider": "gemini", "kind": "signature", "data": "s"}]).reasoning


def test_bounds() -> None:
    with pytest.raises(InvalidMessage, match="reasoning parts") as info:
        assistant([THOUGHT] * (MAX_REASONING_PARTS + 1))
    assert info.value.code == "reasoning_too_large"
    big = {**THOUGHT, "text": "x" * MAX_REASONING_CHARS}
    with pytest.raises(InvalidMessage) as info:
        assistant([big])
    assert info.value.code == "reasoning_too_large"


def test_reasoning_beyond_the_bounds_keeps_its_shown_text_unsigned() -> None:
    within = [Reasoning.from_dict(THOUGHT)] * MAX_REASONING_PARTS
    assert bounded_reasoning(within) == (tuple(within), 0)
    # Too many parts: the text stays, as one part no adapter sends back.
    redacted = Reasoning("anthropic", ReasoningKind.REDACTED, data="opaque")
    many = [*within, redacted]
    kept, omitted = bounded_reasoning(many)
    assert omitted == MAX_REASONING_PARTS + 1
    assert kept == (
        Reasoning("anthropic", ReasoningKind.THINKING, "\n\n".join(["t"] * MAX_REASONING_PARTS)),
    )
    assert assistant([part.to_stored() for part in kept]).reasoning == kept
    # Too many characters: the text is cut to the bound; data alone leaves nothing.
    big = Reasoning("anthropic", ReasoningKind.THINKING, "x" * MAX_REASONING_CHARS, "sig")
    (cut,), omitted = bounded_reasoning([big])
    assert (cut.text, cut.data, omitted) == ("x" * MAX_REASONING_CHARS, None, 1)
    opaque = Reasoning("x", ReasoningKind.ENCRYPTED, data="e" * (MAX_REASONING_CHARS + 1))
    assert bounded_reasoning([opaque]) == ((), 1)


def test_named_constructors_take_no_reasoning_as_none() -> None:
    assert ChatMessage.assistant("a", reasoning=[]).reasoning is None
    assert ChatMessage.assistant_tool_calls([ToolCall("c", "f")], reasoning=()).reasoning is None
