"""Typed events yielded by ``Provider.stream()``.

A stream yields any number of :class:`ReasoningDelta`, :class:`TextDelta` and
:class:`ToolCallCompleted` events and ends with exactly one
:class:`ResponseCompleted` carrying the whole reply (the same object
``complete()`` would have returned, usage included).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ToolCall

__all__ = [
    "ReasoningDelta",
    "ResponseCompleted",
    "StreamEvent",
    "TextDelta",
    "ToolCallCompleted",
    "whole_reply_stream",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply's text, in order."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the reply's reasoning text (thinking, or a summary of it), in order.

    The pieces of one reply, joined, are the text of its reasoning parts joined
    (only thinking and summaries have text; signatures and encrypted or
    redacted reasoning are never shown).
    """

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallCompleted:
    """One tool call whose fragments are complete."""

    tool_call: ToolCall


@dataclass(frozen=True, slots=True)
class ResponseCompleted:
    """The last event: the assembled reply with finish reason and usage."""

    response: CompletionResponse


StreamEvent = ReasoningDelta | TextDelta | ToolCallCompleted | ResponseCompleted
"""Any event of a provider stream."""


def whole_reply_stream(response: CompletionResponse) -> Iterator[StreamEvent]:
    """A reply that arrived whole, as the events a stream of it yields."""
    for part in response.reasoning or ():
        if part.text:
            yield ReasoningDelta(part.text)
    if response.content:
        yield TextDelta(response.content)
    for call in response.tool_calls:
        yield ToolCallCompleted(call)
    yield ResponseCompleted(response)
