"""Typed events yielded by ``Provider.stream()``.

A stream yields any number of :class:`TextDelta` and :class:`ToolCallCompleted`
events and ends with exactly one :class:`ResponseCompleted` carrying the whole
reply (the same object ``complete()`` would have returned, usage included).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ToolCall

__all__ = [
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
class ToolCallCompleted:
    """One tool call whose fragments are complete."""

    tool_call: ToolCall


@dataclass(frozen=True, slots=True)
class ResponseCompleted:
    """The last event: the assembled reply with finish reason and usage."""

    response: CompletionResponse


StreamEvent = TextDelta | ToolCallCompleted | ResponseCompleted
"""Any event of a provider stream."""


def whole_reply_stream(response: CompletionResponse) -> Iterator[StreamEvent]:
    """A reply that arrived whole, as the events a stream of it yields."""
    if response.content:
        yield TextDelta(response.content)
    for call in response.tool_calls:
        yield ToolCallCompleted(call)
    yield ResponseCompleted(response)
