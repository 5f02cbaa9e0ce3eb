"""Token estimates (llm_conversations/core/tokens.py): the heuristic against tiktoken, anchors."""

from __future__ import annotations

import pytest

from llm_conversations.core import tokens
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.tokens import (
    MESSAGE_OVERHEAD,
    REPLY_OVERHEAD,
    Anchor,
    counter_for,
    estimate_request,
    heuristic_tokens,
    message_tokens,
)
from llm_conversations.core.tool_calls import ToolCall
from llm_conversations.core.tool_specs import ToolSpec
from tests.support.token_corpus import corpus

# The largest error of the heuristic on one corpus conversation, measured
# against cl100k_base: 19.4% (the log excerpt); the bound leaves a little room.
HEURISTIC_ERROR_BOUND = 0.20


def _cl100k() -> tokens.Counter:
    tiktoken = pytest.importorskip("tiktoken")
    try:
        encoding = tiktoken.get_encoding("cl100k_base")
    except Exception:  # no network: the offline copy of the same file
        encoding = tiktoken.get_encoding(tokens.OFFLINE_ENCODING)
    return tokens.tiktoken_counter(encoding)


def test_heuristic_error_on_the_corpus_against_tiktoken(capsys: pytest.CaptureFixture[str]) -> None:
    exact = _cl100k()
    errors = []
    for conversation in corpus():
        estimated = estimate_request(conversation)
        counted = estimate_request(conversation, count=exact)
        errors.append((estimated - counted) / counted)
    worst = max(abs(error) for error in errors)
    mean = sum(abs(error) for error in errors) / len(errors)
    with capsys.disabled():
        print(
            f"\nheuristic vs cl100k_base: worst {worst:.1%}, mean {mean:.1%} over "
            f"{len(errors)} conversations ({', '.join(f'{e:+.1%}' for e in errors)})"
        )
    assert worst <= HEURISTIC_ERROR_BOUND


def test_heuristic_counts() -> None:
    assert heuristic_tokens("") == 0
    assert heuristic_tokens("a") == 1
    # 12 characters, 2 spaces: (12 - 4) / 3 -> 3.
    assert heuristic_tokens("one two four") == 3
    # Three CJK characters: 9 bytes, 6 past one a character, 3 wide -> 9 / 2.5 -> 4.
    assert heuristic_tokens("東京都") == 4


def test_message_tokens_count_calls_and_ids() -> None:
    call = ToolCall("c1", "f", {})
    turn = ChatMessage.assistant_tool_calls([call])
    count = len  # one token a character, to see every part counted
    assert message_tokens(turn, count) == MESSAGE_OVERHEAD + tokens.CALL_OVERHEAD + 2 + 1 + 2
    result = ChatMessage.tool_result("c1", "ok")
    assert message_tokens(result, count) == MESSAGE_OVERHEAD + 2 + 2


def test_estimate_request_adds_instructions_and_tools() -> None:
    messages = [ChatMessage.user("hello")]
    spec = ToolSpec("f", "d")
    base = estimate_request(messages, count=len)
    assert base == REPLY_OVERHEAD + MESSAGE_OVERHEAD + 5
    assert estimate_request(messages, instructions="be brief", count=len) == (
        base + MESSAGE_OVERHEAD + 8
    )
    assert estimate_request(messages, tools=[spec], count=len) == base + tokens.tools_tokens(
        [spec], len
    )


def test_anchor_extends_the_reported_count() -> None:
    anchor = Anchor(input_tokens=1000, estimated=800, start=0, end=10)
    # Same start, two messages more estimated at 50: the report plus 50.
    assert anchor.correct(850, 0, 12) == 1050
    # Another start (a cut): scaled by 1000/800.
    assert anchor.correct(400, 5, 12) == 500
    # An odd report is clamped to twice the estimate.
    assert Anchor(input_tokens=10_000, estimated=100, start=0, end=1).correct(100, 1, 2) == 200
    messages = [ChatMessage.user("x" * 30)] * 3
    assert estimate_request(messages, count=len, anchor=Anchor(500, 0, 0, 3)) == 500 + (
        REPLY_OVERHEAD + 3 * (MESSAGE_OVERHEAD + 30)
    )


def test_counter_for_uses_tiktoken_for_openai_models_only() -> None:
    pytest.importorskip("tiktoken")
    assert counter_for("claude-sonnet-4-5") is heuristic_tokens
    counter = counter_for("gpt-4o")
    assert counter is not heuristic_tokens
    assert counter("hello world") == 2


def test_counter_for_falls_back_without_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_tiktoken(name: str, *args: object, **kwargs: object) -> object:
        if name == "tiktoken":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    tokens._tiktoken_for.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_tiktoken)
    try:
        assert counter_for("gpt-4o") is heuristic_tokens
    finally:
        monkeypatch.undo()
        tokens._tiktoken_for.cache_clear()
