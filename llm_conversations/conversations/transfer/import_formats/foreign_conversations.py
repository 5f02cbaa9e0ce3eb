"""What a parser of another tool's format gives the importer, and the builder it uses.

A parser turns one conversation of a foreign file into a
:class:`ForeignConversation`: :class:`~llm_conversations.core.messages.ChatMessage`
values (built through their own rules) with the times and ids the file had,
and what it left out (:class:`LeftOut`). The importer stores them as any
history is stored (``conversations/store.insert_history``: the sequence
rules, what the columns hold, the attachment checks).

:class:`Transcript` assembles turns in the order a file lists them: text,
reasoning and calls of the assistant gather into one turn until a result, a
user turn or new text after calls ends it, and a call the file answers
nowhere is answered with an error result (:data:`NO_RESULT`) before the next
turn, so every conversation a parser gives keeps the sequence rules.

Pure: no Django, no database.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from llm_conversations.core.completions import Usage
from llm_conversations.core.content_parts import ContentPart, TextPart
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.reasoning import Reasoning, ReasoningKind
from llm_conversations.core.tool_calls import ToolCall
from llm_conversations.exceptions import InvalidImport, InvalidMessage

__all__ = [
    "NO_RESULT",
    "ForeignConversation",
    "ForeignMessage",
    "LeftOut",
    "Transcript",
    "epoch_moment",
    "iso_moment",
    "mapping",
    "message_arrays",
    "messages_of",
    "output_text",
    "refuse",
    "sequence",
    "text_parts",
    "uses_message_arrays",
]

# The error result of a call the file answers nowhere.
NO_RESULT = "The imported file holds no result for this tool call."


def refuse(field: str, why: str) -> InvalidImport:
    """An ``invalid_import`` error naming ``field`` of the foreign record."""
    return InvalidImport("invalid_import", f"{field or 'the record'} {why}.", field=field or None)


@dataclass(frozen=True, slots=True)
class LeftOut:
    """Something of an imported record that is not stored, and why (a warning)."""

    code: str
    message: str
    field: str | None = None


@dataclass(frozen=True, slots=True)
class ForeignMessage:
    """One turn read from a foreign file, with what its row keeps beside it."""

    message: ChatMessage
    created_at: datetime | None = None
    source_id: str | None = None
    model: str = ""
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class ForeignConversation:
    """One conversation read from a foreign file."""

    messages: tuple[ForeignMessage, ...]
    title: str = ""
    source_id: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    left_out: tuple[LeftOut, ...] = ()
    # What else the file says of it, kept in the conversation's metadata.
    details: Mapping[str, Any] = field(default_factory=dict)


def epoch_moment(value: Any, field: str) -> datetime | None:
    """Seconds since the epoch (a number, or ``None``) as an aware moment."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise refuse(field, "must be a number of seconds since the epoch")
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise refuse(field, "is out of range") from None


def iso_moment(value: Any, field: str) -> datetime | None:
    """ISO 8601 text (``Z`` allowed; UTC when no zone is given), or ``None``."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise refuse(field, "must be an ISO 8601 date and time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def output_text(value: Any) -> str:
    """A tool's output as the text a tool turn holds: strings as they are, else JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass
class _Draft:
    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[Reasoning] = field(default_factory=list)
    created_at: datetime | None = None
    source_id: str | None = None
    model: str = ""
    where: str = ""
    usage: Usage | None = None

    def empty(self) -> bool:
        return not (self.texts or self.calls or self.reasoning)


class Transcript:
    """Turns in file order, kept to the sequence rules (see the module).

    ``reasoning_provider`` tags reasoning read from the file; no adapter is
    named so, so it is shown and kept but never sent back to a provider.
    ``where`` arguments name the value read, for errors (``[3].content``).
    """

    def __init__(self, reasoning_provider: str) -> None:
        self.reasoning_provider = reasoning_provider
        self.messages: list[ForeignMessage] = []
        self.left_out: list[LeftOut] = []
        self._draft = _Draft()
        self._open: list[tuple[str, str]] = []  # (call id, tool name), unanswered

    def note(self, code: str, message: str, where: str | None = None) -> None:
        """Record something left out."""
        self.left_out.append(LeftOut(code, message, where or None))

    def _add(
        self,
        message: ChatMessage,
        created_at: datetime | None,
        source_id: str | None,
        model: str = "",
        usage: Usage | None = None,
    ) -> None:
        self.messages.append(ForeignMessage(message, created_at, source_id, model, usage))

    def _build(
        self, where: str, make: Callable[..., ChatMessage], *args: Any, **kwargs: Any
    ) -> ChatMessage:
        """``make(...)``, a message's rule errors named from ``where``."""
        try:
            return make(*args, **kwargs)
        except InvalidMessage as exc:
            raise exc.within(where) from None

    def _flush(self) -> None:
        draft, self._draft = self._draft, _Draft()
        if draft.empty():
            return
        if not draft.texts and not draft.calls:
            self.note(
                "reasoning_without_answer",
                "reasoning with no answer after it is left out.",
                draft.where,
            )
            return
        content = "\n\n".join(draft.texts)
        message = self._build(
            draft.where,
            ChatMessage,
            Role.ASSISTANT,
            content,
            tuple(draft.calls) or None,
            reasoning=tuple(draft.reasoning) or None,
        )
        self._add(message, draft.created_at, draft.source_id, draft.model, draft.usage)
        self._open = [(call.id, call.name) for call in draft.calls]

    def _close_open(self, created_at: datetime | None) -> None:
        self._flush()
        for call_id, name in self._open:
            self.note(
                "missing_tool_result",
                f"the call {call_id} ({name}) has no result in the file; it is answered "
                "with an error result.",
            )
            self._add(ChatMessage.tool_result(call_id, NO_RESULT, is_error=True), created_at, None)
        self._open = []

    def _draft_for(
        self, where: str, created_at: datetime | None, source_id: str | None, model: str
    ) -> _Draft:
        if self._open:
            self._close_open(created_at)
        draft = self._draft
        if draft.empty():
            draft.where, draft.created_at, draft.source_id = where, created_at, source_id
        if model and not draft.model:
            draft.model = model
        return draft

    def plain(
        self,
        role: Role,
        content: str | Sequence[ContentPart],
        where: str,
        created_at: datetime | None = None,
        source_id: str | None = None,
    ) -> None:
        """A system or user turn (text, or user parts)."""
        self._close_open(created_at)
        value: Any = content
        if not isinstance(content, str):
            # Text alone is kept as text; parts only when there is an image or a file.
            texts = [part.text for part in content if isinstance(part, TextPart)]
            value = "\n\n".join(texts) if len(texts) == len(content) else list(content)
        self._add(self._build(where, ChatMessage, role, value), created_at, source_id)

    def text(
        self,
        text: str,
        where: str,
        created_at: datetime | None = None,
        source_id: str | None = None,
        model: str = "",
    ) -> None:
        """Assistant text; after calls of the same turn it begins the next turn."""
        if self._draft.calls:
            self._flush()
        if text:
            self._draft_for(where, created_at, source_id, model).texts.append(text)

    def thinking(
        self,
        text: str,
        where: str,
        created_at: datetime | None = None,
        source_id: str | None = None,
        model: str = "",
        signature: str | None = None,
    ) -> None:
        """Reasoning the model showed, for the assistant turn it precedes or belongs to,
        with the signature the file keeps beside it."""
        if self._draft.calls or self._draft.texts:
            self._flush()
        if text:
            draft = self._draft_for(where, created_at, source_id, model)
            draft.reasoning.append(
                Reasoning(self.reasoning_provider, ReasoningKind.THINKING, text, signature or None)
            )

    def usage(self, usage: Usage) -> None:
        """The token usage of the assistant turn being gathered."""
        self._draft.usage = usage

    def call(
        self,
        call_id: str,
        name: str,
        arguments: Any,
        where: str,
        created_at: datetime | None = None,
        source_id: str | None = None,
        model: str = "",
    ) -> None:
        """A tool call of the current assistant turn."""
        draft = self._draft_for(where, created_at, source_id, model)
        try:
            draft.calls.append(ToolCall.parse(id=call_id, name=name, arguments=arguments))
        except InvalidMessage as exc:
            raise exc.within(where) from None

    def end_turn(self) -> None:
        """End the assistant turn being gathered (the next text begins another)."""
        self._flush()

    def open_call(self, name: str | None = None) -> str | None:
        """The id of the unanswered call of ``name`` (the first of any name without one)."""
        pending = self._pending()
        for call_id, called in pending:
            if name is None or called == name:
                return call_id
        return None

    def _pending(self) -> list[tuple[str, str]]:
        if self._draft.calls:
            return [(call.id, call.name) for call in self._draft.calls]
        return self._open

    def result(
        self,
        call_id: str,
        content: str | Sequence[ContentPart],
        where: str,
        *,
        is_error: bool = False,
        created_at: datetime | None = None,
        source_id: str | None = None,
    ) -> None:
        """The tool turn answering ``call_id``; the turn making the call ends here."""
        self._flush()
        value: Any = list(content) if not isinstance(content, str) else content
        if not value:
            value = "(no output)"
        message = self._build(where, ChatMessage.tool_result, call_id, value, is_error=is_error)
        self._add(message, created_at, source_id)
        self._open = [(open_id, name) for open_id, name in self._open if open_id != call_id]

    def finish(self, **conversation: Any) -> ForeignConversation:
        """The conversation read, every call answered."""
        self._close_open(None)
        return ForeignConversation(
            messages=tuple(self.messages), left_out=tuple(self.left_out), **conversation
        )


def text_parts(texts: Sequence[str]) -> list[ContentPart]:
    """Non-empty texts as text parts."""
    return [TextPart(text) for text in texts if text]


def mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` as a JSON object."""
    if not isinstance(value, Mapping):
        raise refuse(where, "must be a JSON object")
    return value


def sequence(value: Any, where: str) -> list[Any]:
    """``value`` as a JSON array."""
    if not isinstance(value, list):
        raise refuse(where, "must be a JSON array")
    return value


def messages_of(item: Any) -> Any:
    """The messages of one conversation of a message-array file: the item itself,
    or its ``messages``."""
    return item.get("messages") if isinstance(item, Mapping) else item


def message_arrays(document: Any, is_message: Callable[[Any], bool]) -> list[tuple[str, Any]]:
    """The conversations of a message-array file: one array of messages (or an
    object holding ``messages``), or a list of them."""
    if isinstance(document, Mapping) or (
        isinstance(document, list) and document and is_message(document[0])
    ):
        return [("item 1", document)]
    return [(f"item {index}", item) for index, item in enumerate(sequence(document, ""), 1)]


def uses_message_arrays(document: Any, is_message: Callable[[Any], bool]) -> bool:
    """Whether the first conversation of ``document`` is an array of ``is_message``."""
    items = message_arrays(document, is_message) if isinstance(document, list | Mapping) else []
    if not items:
        return False
    messages = messages_of(items[0][1])
    return isinstance(messages, list) and bool(messages) and all(map(is_message, messages))
