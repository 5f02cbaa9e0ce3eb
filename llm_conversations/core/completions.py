"""What a provider returns: the parsed reply, its finish reason and token usage.

This module imports nothing from Django and nothing from httpx.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from llm_conversations.core.messages import ChatMessage, ToolCall, check_tool_calls
from llm_conversations.core.reasoning import Reasoning

__all__ = ["CompletionResponse", "FinishReason", "Usage"]


class FinishReason(StrEnum):
    """Why the model stopped, normalised across providers."""

    STOP = "stop"
    LENGTH = "length"
    TOOL_CALLS = "tool_calls"
    CONTENT_FILTER = "content_filter"
    OTHER = "other"
    # Not a provider's word: the run was cancelled while the reply streamed,
    # and the text streamed so far is kept as the turn.
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one completion (or a sum of several).

    ``total_tokens`` defaults to input plus output; ``cached_tokens`` (the
    input read from the provider's cache), ``cache_write_tokens`` (the input
    written to it, which Anthropic bills above the input price) and
    ``reasoning_tokens`` (the part of the output spent reasoning) are ``None``
    where the provider does not report them. Cache reads and writes are part
    of ``input_tokens``.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.total_tokens is None:
            object.__setattr__(self, "total_tokens", self.input_tokens + self.output_tokens)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=(self.total_tokens or 0) + (other.total_tokens or 0),
            cached_tokens=_sum_reported(self.cached_tokens, other.cached_tokens),
            reasoning_tokens=_sum_reported(self.reasoning_tokens, other.reasoning_tokens),
            cache_write_tokens=_sum_reported(self.cache_write_tokens, other.cache_write_tokens),
        )


def _sum_reported(a: int | None, b: int | None) -> int | None:
    """The sum of two optional counts; ``None`` when neither was reported."""
    return None if a is None and b is None else (a or 0) + (b or 0)


@dataclass(frozen=True, slots=True)
class CompletionResponse:
    """One parsed provider reply.

    ``raw`` is the provider's decoded response body, kept for inspection;
    ``raw_finish_reason`` is the provider's own word for ``finish_reason``.
    ``sanitized`` is true when the adapter changed the model's output so a
    database can store it: NUL or lone surrogates replaced by U+FFFD in the
    text, a call id or name, or a call's arguments kept as ``raw_arguments``
    (the call is then ``malformed``) because their decoded form held such a
    character or a non-finite number. ``reasoning`` is the reply's reasoning
    state, in the order the provider sent it, each part tagged with the
    provider; the turn stored from the reply keeps it. ``reasoning_omitted``
    counts the parts a reply beyond a turn's bounds could not keep
    (:func:`~llm_conversations.core.reasoning.bounded_reasoning`).
    """

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason = FinishReason.STOP
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    provider: str = ""
    raw: Mapping[str, Any] | None = None
    raw_finish_reason: str | None = None
    sanitized: bool = False
    reasoning: tuple[Reasoning, ...] = ()
    reasoning_omitted: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "reasoning", tuple(self.reasoning))
        check_tool_calls(self.tool_calls)

    def to_message(self) -> ChatMessage:
        """The assistant turn this reply adds to the conversation."""
        if self.tool_calls:
            return ChatMessage.assistant_tool_calls(
                self.tool_calls, self.content, reasoning=self.reasoning
            )
        return ChatMessage.assistant(self.content, reasoning=self.reasoning)
