"""One place that gathers a reply as an adapter reads it, streamed or whole."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from llm_conversations.core.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.core.messages import ToolCall
from llm_conversations.core.reasoning import Reasoning, ReasoningKind
from llm_conversations.core.text import storable_text

from ._wire import storable_call
from .stream_events import ReasoningDelta, ResponseCompleted, TextDelta, ToolCallCompleted

if TYPE_CHECKING:
    from .base import Provider

__all__ = ["StreamAccumulator"]


# The kinds a part of text alone may be (the others need their data).
_TEXT_ONLY = frozenset({ReasoningKind.THINKING, ReasoningKind.SUMMARY, ReasoningKind.COMPACTION})


class StreamAccumulator:
    """The text, calls and metadata of one reply, and the raw pieces it came in.

    Adapters feed it as they read: :meth:`text` and :meth:`call` return the
    event to yield, :meth:`chunk` keeps a raw piece, :meth:`keep` records the
    latest model, finish reason and usage. :meth:`response` and :meth:`finish`
    build the reply through ``Provider.completion`` so it is redacted.
    ``usage`` is the provider's own usage data, read by the adapter at the end.

    :meth:`reason` adds a part of the reply's reasoning state, tagged with
    the provider's backend when the reply is built.

    Text and calls are made storable as they are added (see
    :func:`~llm_conversations.providers._wire.storable_call`), so the events
    yielded and the reply agree; ``sanitized`` records that something changed.
    """

    def __init__(
        self,
        *,
        raw_key: str = "chunks",
        model: str | None = None,
        raw_reason: str | None = None,
        usage: Any = None,
    ) -> None:
        self.raw_key = raw_key
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.reasoning: list[tuple[ReasoningKind, str, str | None, str | None]] = []
        self.reasoning_chars = 0
        self.chunks: list[Any] = []
        self.model = model
        self.raw_reason = raw_reason
        self.usage = usage
        self.sanitized = False

    def text(self, piece: str | None) -> TextDelta | None:
        """Add a piece of text; the event to yield, or ``None`` for an empty piece."""
        if not piece:
            return None
        clean = storable_text(piece)
        self.sanitized |= clean != piece
        self.texts.append(clean)
        return TextDelta(clean)

    @staticmethod
    def thought(piece: str | None) -> ReasoningDelta | None:
        """The event of a piece of reasoning text as it streams (``None`` for an
        empty piece); the adapter adds the part itself with :meth:`reason`, whole
        or in the same pieces."""
        return ReasoningDelta(piece) if isinstance(piece, str) and piece else None

    def call(self, id: str, name: str, arguments: object) -> ToolCallCompleted:
        """Add a complete tool call as the provider sent it; the event to yield.

        ``arguments`` is JSON text, a decoded value or ``None``.
        """
        tool_call, changed = storable_call(id, name, arguments)
        self.sanitized |= changed
        self.calls.append(tool_call)
        return ToolCallCompleted(tool_call)

    def reason(
        self,
        kind: ReasoningKind,
        text: str | None = None,
        data: str | None = None,
        *,
        call_id: str | None = None,
    ) -> None:
        """Add a part of the reasoning state; one with neither text nor data is dropped.

        ``data`` is the opaque value the provider wants back (a signature, or
        redacted or encrypted reasoning); ``call_id`` ties a signature to one
        of the reply's calls. Thinking text without a signature is joined to
        the next piece of thinking, so a streamed thought is one part;
        ``reasoning_chars`` counts what was added, for the adapter's size check.
        """
        text = text if isinstance(text, str) else ""
        data = data if isinstance(data, str) and data else None
        if not text and data is None:
            return
        if data is None and kind not in _TEXT_ONLY:
            return
        self.reasoning_chars += len(text) + len(data or "")
        last = self.reasoning[-1] if self.reasoning else None
        if kind is ReasoningKind.THINKING and last and last[0] is kind and last[2] is None:
            # Streamed thinking comes in pieces: one part, closed by its signature.
            self.reasoning[-1] = (kind, last[1] + text, data, None)
            return
        self.reasoning.append((kind, text, data, call_id))

    def chunk(self, raw: Any) -> None:
        """Keep one decoded piece of the stream for ``raw``."""
        self.chunks.append(raw)

    def keep(
        self, *, model: str | None = None, raw_reason: str | None = None, usage: Any = None
    ) -> None:
        """Record what a piece reports; an absent or empty value keeps the earlier one."""
        # Providers repeat these on several chunks and leave them empty on others.
        self.model = model or self.model
        self.raw_reason = raw_reason or self.raw_reason
        self.usage = usage or self.usage

    @property
    def has_calls(self) -> bool:
        """Whether any tool call was added (some providers say "stop" beside calls)."""
        return bool(self.calls)

    def response(
        self,
        provider: Provider,
        finish_reason: FinishReason,
        usage: Usage,
        raw: Mapping[str, Any] | None = None,
    ) -> CompletionResponse:
        """The reply; ``raw`` defaults to ``{raw_key: chunks}``."""
        return provider.completion(
            content="".join(self.texts),
            tool_calls=self.calls,
            finish_reason=finish_reason,
            usage=usage,
            model=self.model,
            raw=raw if raw is not None else {self.raw_key: self.chunks},
            raw_finish_reason=self.raw_reason,
            sanitized=self.sanitized,
            reasoning=[
                Reasoning(provider.backend, kind, text, data, call_id)
                for kind, text, data, call_id in self.reasoning
            ],
        )

    def finish(
        self, provider: Provider, finish_reason: FinishReason, usage: Usage
    ) -> ResponseCompleted:
        """The last event of a stream, carrying the whole reply."""
        return ResponseCompleted(self.response(provider, finish_reason, usage))
