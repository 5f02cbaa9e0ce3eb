"""Building a provider's reply: :class:`ReplyBuilding`, mixed into ``Provider``,
whose ``completion()`` is the one way an adapter makes a ``CompletionResponse``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, ClassVar, Protocol

from llm_conversations.core.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.core.messages import ToolCall
from llm_conversations.core.reasoning import Reasoning, bounded_reasoning
from llm_conversations.core.text import storable_text

from ._wire import storable_call
from .errors import InvalidResponseError

__all__ = ["ReplyBuilding"]


class _Replier(Protocol):
    """What :class:`ReplyBuilding` needs of the provider it is mixed into."""

    backend: ClassVar[str]
    model: str

    @property
    def max_reply_chars(self) -> int: ...

    def check_size(self, chars: int, what: str) -> None: ...

    def redact_data(self, data: Any) -> Any: ...


class ReplyBuilding:
    """Mixed into :class:`~llm_conversations.providers.base.Provider`: its replies,
    storable, redacted and within ``max_reply_chars``."""

    def check_size(self: _Replier, chars: int, what: str) -> None:
        """Raise :class:`InvalidResponseError` when ``chars`` exceeds ``max_reply_chars``."""
        if chars > self.max_reply_chars:
            raise InvalidResponseError(
                f"{self.backend}: the reply's {what} is longer than MAX_REPLY_CHARS "
                f"({self.max_reply_chars} characters).",
                provider=self.backend,
            )

    def completion(
        self: _Replier,
        *,
        content: str,
        tool_calls: Iterable[ToolCall],
        finish_reason: FinishReason,
        usage: Usage,
        model: str | None,
        raw: Mapping[str, Any],
        raw_finish_reason: str | None,
        sanitized: bool = False,
        reasoning: Iterable[Reasoning] = (),
    ) -> CompletionResponse:
        """A parsed reply from this provider: ``raw`` redacted, ``model`` defaulted.

        Every adapter builds its replies here, so no raw body escapes
        redaction, no reply exceeds ``max_reply_chars`` (text, or any call's
        arguments text), none holds what a database cannot store and its
        reasoning fits a turn (``bounded_reasoning``, ``reasoning_omitted``).
        ``StreamAccumulator`` already made its text and calls storable and
        says so in ``sanitized``; this applies the same rules again for
        replies built another way.
        """
        clean_content = storable_text(content)
        calls, calls_changed = _storable_calls(tool_calls)
        parts, parts_changed = _storable_reasoning(reasoning)
        sanitized = sanitized or clean_content != content or calls_changed or parts_changed
        self.check_size(len(clean_content), "text")
        for call in calls:
            self.check_size(len(call.arguments_json), f"arguments of {call.name!r}")
        self.check_size(sum(part.size for part in parts), "reasoning")
        kept, omitted = bounded_reasoning(parts)
        return CompletionResponse(
            content=clean_content,
            tool_calls=calls,
            finish_reason=finish_reason,
            usage=usage,
            model=model or self.model,
            provider=self.backend,
            raw=self.redact_data(raw),
            raw_finish_reason=raw_finish_reason,
            sanitized=sanitized,
            reasoning=kept,
            reasoning_omitted=omitted,
        )


def _storable_calls(tool_calls: Iterable[ToolCall]) -> tuple[tuple[ToolCall, ...], bool]:
    """The calls with storable names and arguments, and whether any changed."""
    calls = []
    changed = False
    for call in tool_calls:
        arguments = call.raw_arguments if call.malformed else call.arguments
        clean, call_changed = storable_call(call.id, call.name, arguments)
        if call_changed:
            call, changed = clean, True
        calls.append(call)
    return tuple(calls), changed


def _storable_reasoning(reasoning: Iterable[Reasoning]) -> tuple[list[Reasoning], bool]:
    """The reasoning parts with storable text and data, and whether any changed."""
    parts = []
    changed = False
    for part in reasoning:
        clean_text = storable_text(part.text)
        clean_data = None if part.data is None else storable_text(part.data)
        if (clean_text, clean_data) != (part.text, part.data):
            part, changed = replace(part, text=clean_text, data=clean_data), True
        parts.append(part)
    return parts, changed
