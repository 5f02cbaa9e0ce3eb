"""Typed events yielded by ``Provider.stream()``.

A stream yields any number of :class:`TextDelta` and :class:`ToolCallCompleted`
events and ends with exactly one :class:`ResponseCompleted` carrying the whole
reply (the same object ``complete()`` would have returned, usage included).
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ToolCall

__all__ = ["ResponseCompleted", "StreamEvent", "TextDelta", "ToolCallCompleted"]


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
