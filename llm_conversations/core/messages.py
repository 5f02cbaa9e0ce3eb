"""Typed chat messages: one value object for all four roles.

This module imports nothing from Django and nothing from httpx. Every rule about
the shape of a message lives here once (the rules of a sequence of messages are
:mod:`llm_conversations.core.sequence`'s); the models, the providers and the API
build these objects and so inherit the rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

from llm_conversations.core.content_parts import (
    ContentPart,
    FilePart,
    ImagePart,
    TextPart,
    check_parts,
    parts_text,
)
from llm_conversations.core.reasoning import (
    Reasoning,
    ReasoningKind,
    check_reasoning,
    reasoning_from_list,
)
from llm_conversations.core.tool_calls import ToolCall, check_tool_calls
from llm_conversations.exceptions import InvalidMessage, join_field

__all__ = [
    "ChatMessage",
    "ContentPart",
    "FilePart",
    "ImagePart",
    "InvalidMessage",
    "MessageInput",
    "Reasoning",
    "ReasoningKind",
    "Role",
    "TextPart",
    "ToolCall",
    "as_chat_messages",
    "check_tool_calls",
    "join_field",
]


class Role(StrEnum):
    """The author of a chat message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


# A dict lookup is several times faster than calling the enum, and loading
# long histories does this once per row.
_ROLES: dict[object, Role] = {role.value: role for role in Role}


def _role(value: object) -> Role:
    try:
        return _ROLES[value]
    except (KeyError, TypeError):
        allowed = ", ".join(r.value for r in Role)
        raise InvalidMessage(
            "invalid_role", f"role must be one of {allowed}; got {value!r}.", field="role"
        ) from None


_MESSAGE_KEYS = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "is_error", "reasoning"}
)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One turn of a conversation, for any of the four roles.

    =========  ==================================  ============  ============
    role       content                             tool_calls    tool_call_id
    =========  ==================================  ============  ============
    system     text, required                      forbidden     forbidden
    user       text, or text/image/file parts      forbidden     forbidden
    assistant  text, may be ``""``                 optional      forbidden
    tool       text, or text/image parts           forbidden     required
    =========  ==================================  ============  ============

    ``is_error`` marks a tool result that reports a failure; it is allowed on
    tool turns only. Use the named constructors rather than the class itself.

    Content given as a list of parts (:mod:`llm_conversations.core.content_parts`)
    is kept in ``parts``, and ``content`` then holds the text of its text
    parts (``""`` when there are none), so code that reads text keeps working.

    ``reasoning`` is the model's reasoning state of an assistant turn
    (:mod:`llm_conversations.core.reasoning`), ``None`` when it has none; it is
    never part of ``content``.
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] | None = None
    tool_call_id: str | None = None
    is_error: bool = False
    parts: tuple[ContentPart, ...] | None = None
    reasoning: tuple[Reasoning, ...] | None = None

    def __post_init__(self) -> None:
        # One step per field, in this order: the first rule a message breaks is
        # the one reported.
        role = _role(self.role)
        object.__setattr__(self, "role", role)
        self._take_parts(role)
        tool_calls = self._take_tool_calls(role)
        self._check_content(role, tool_calls)
        self._check_tool_call_id(role)
        self._check_is_error(role)
        self._take_reasoning(role, tool_calls)

    def _take_parts(self, role: Role) -> None:
        """Content given as parts (in ``content`` or ``parts``): checked, kept in
        ``parts``, their text in ``content``."""
        raw_parts: object = self.parts
        if isinstance(self.content, list | tuple):
            raw_parts = self.content
        if raw_parts is None:
            return
        if isinstance(raw_parts, str | bytes | Mapping) or not isinstance(raw_parts, Iterable):
            raise InvalidMessage(
                "invalid_content", "content parts must be a list.", field="content"
            )
        parts = check_parts(role.value, raw_parts)
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "content", parts_text(parts))

    def _take_tool_calls(self, role: Role) -> tuple[ToolCall, ...] | None:
        """The calls of an assistant turn, checked and kept as a tuple."""
        tool_calls = self.tool_calls
        if tool_calls is None:
            return None
        if role is not Role.ASSISTANT:
            raise InvalidMessage(
                "tool_calls_not_allowed",
                f"tool_calls are only allowed on assistant messages, not {role}.",
                field="tool_calls",
            )
        if isinstance(tool_calls, (str, bytes, Mapping)) or not isinstance(tool_calls, Iterable):
            raise InvalidMessage(
                "invalid_tool_call", "tool_calls must be a list.", field="tool_calls"
            )
        tool_calls = tuple(tool_calls)
        if not tool_calls:
            raise InvalidMessage(
                "empty_tool_calls",
                "tool_calls must not be empty; omit it for a plain assistant message.",
                field="tool_calls",
            )
        check_tool_calls(tool_calls)
        object.__setattr__(self, "tool_calls", tool_calls)
        return tool_calls

    def _check_content(self, role: Role, tool_calls: tuple[ToolCall, ...] | None) -> None:
        """Text content: ``""`` beside calls when absent, never empty for system and user."""
        content = self.content
        if content is None and tool_calls is not None:
            content = ""
            object.__setattr__(self, "content", content)
        if not isinstance(content, str):
            code = "missing_content" if content is None else "invalid_content"
            raise InvalidMessage(code, f"{role} message content must be a string.", field="content")
        # An assistant turn may be empty: beside tool calls, or as an empty
        # reply (a refusal, an output limit reached before any text).
        if content == "" and role in (Role.SYSTEM, Role.USER) and self.parts is None:
            raise InvalidMessage(
                "missing_content", f"{role} message content must not be empty.", field="content"
            )

    def _check_tool_call_id(self, role: Role) -> None:
        """A tool turn names the call it answers; no other turn names one."""
        if role is Role.TOOL:
            if not isinstance(self.tool_call_id, str) or not self.tool_call_id:
                raise InvalidMessage(
                    "missing_tool_call_id",
                    "a tool message needs the non-empty tool_call_id of the call it answers.",
                    field="tool_call_id",
                )
        elif self.tool_call_id is not None:
            raise InvalidMessage(
                "tool_call_id_not_allowed",
                f"tool_call_id is only allowed on tool messages, not {role}.",
                field="tool_call_id",
            )

    def _check_is_error(self, role: Role) -> None:
        """``is_error``: a boolean, true on tool turns only."""
        if not isinstance(self.is_error, bool):
            raise InvalidMessage(
                "invalid_is_error", "is_error must be a boolean.", field="is_error"
            )
        if self.is_error and role is not Role.TOOL:
            raise InvalidMessage(
                "is_error_not_allowed",
                f"is_error is only allowed on tool messages, not {role}.",
                field="is_error",
            )

    def _take_reasoning(self, role: Role, tool_calls: tuple[ToolCall, ...] | None) -> None:
        """An assistant turn's reasoning, checked against its calls and kept as a tuple."""
        if self.reasoning is None:
            return
        if role is not Role.ASSISTANT:
            raise InvalidMessage(
                "reasoning_not_allowed",
                f"reasoning is only allowed on assistant messages, not {role}.",
                field="reasoning",
            )
        reasoning = reasoning_from_list(self.reasoning)
        check_reasoning(reasoning, (call.id for call in tool_calls or ()))
        object.__setattr__(self, "reasoning", reasoning)

    # Named constructors ---------------------------------------------------

    @classmethod
    def system(cls, content: str) -> Self:
        """A system (instructions) message."""
        return cls(Role.SYSTEM, content)

    @classmethod
    def user(cls, content: str | Sequence[ContentPart | Mapping[str, Any]]) -> Self:
        """A user message: text, or a list of text, image and file parts."""
        return cls(Role.USER, content)  # type: ignore[arg-type]

    @classmethod
    def assistant(cls, content: str, *, reasoning: Sequence[Reasoning] | None = None) -> Self:
        """A plain assistant reply, with the model's reasoning state if any."""
        return cls(Role.ASSISTANT, content, reasoning=_reasoning(reasoning))

    @classmethod
    def assistant_tool_calls(
        cls,
        tool_calls: Sequence[ToolCall],
        content: str | None = None,
        *,
        reasoning: Sequence[Reasoning] | None = None,
    ) -> Self:
        """An assistant turn that requests tool calls; ``None`` content is stored as ``""``."""
        return cls(
            Role.ASSISTANT,
            content if content is not None else "",
            tuple(tool_calls),
            reasoning=_reasoning(reasoning),
        )

    @classmethod
    def tool_result(
        cls,
        tool_call_id: str,
        content: str | Sequence[ContentPart | Mapping[str, Any]],
        *,
        is_error: bool = False,
    ) -> Self:
        """A tool turn answering the call ``tool_call_id`` (text, or text and image parts)."""
        return cls(
            Role.TOOL,
            content,  # type: ignore[arg-type]
            tool_call_id=tool_call_id,
            is_error=is_error,
        )

    # Dict forms -----------------------------------------------------------

    def to_wire(self) -> dict[str, Any]:
        """The OpenAI Chat Completions request form.

        A plain message is exactly ``{"role", "content"}``. An assistant turn
        with calls adds ``tool_calls`` (arguments as JSON text, ``"{}"`` when
        empty) and sends empty content as ``null``; a tool turn adds
        ``tool_call_id``. ``is_error`` and ``reasoning`` are not part of this
        form (each adapter replays reasoning by its provider's rule). Content parts
        are sent as OpenAI content parts, images and files as data URLs (their
        bytes must be loaded: ``unresolved_attachment`` otherwise).
        """
        content: Any = self.content
        if self.parts is not None:
            content = [part.to_wire() for part in self.parts]
        data: dict[str, Any] = {"role": self.role.value, "content": content}
        if self.tool_calls is not None:
            data["content"] = self.content or None
            data["tool_calls"] = [call.to_wire() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        return data

    def to_stored(self) -> dict[str, Any]:
        """The form kept in the database, one key per ``Message`` column.

        Always the five keys ``role``, ``content``, ``tool_calls`` (decoded
        calls, or ``None``), ``tool_call_id`` and ``is_error``, and
        ``reasoning`` (stored parts) when the turn has reasoning. Content parts
        are a list of stored parts: images and files by ``attachment_id``.
        """
        stored: dict[str, Any] = {
            "role": self.role.value,
            "content": (
                self.content if self.parts is None else [part.to_stored() for part in self.parts]
            ),
            "tool_calls": (
                [call.to_stored() for call in self.tool_calls] if self.tool_calls else None
            ),
            "tool_call_id": self.tool_call_id,
            "is_error": self.is_error,
        }
        if self.reasoning is not None:
            stored["reasoning"] = [part.to_stored() for part in self.reasoning]
        return stored

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Read either form, :meth:`to_wire` or :meth:`to_stored`, into a validated message.

        Tool call arguments may be JSON text or objects; ``content`` may be
        ``null`` or absent beside ``tool_calls``, or a list of parts in either
        form (images and files as data URLs or by ``attachment_id``); ``None`` stands for an absent
        ``tool_calls``, ``tool_call_id`` or ``reasoning``. An ``is_error`` key is read for tool
        messages, ``reasoning`` (stored parts) for assistant ones. Unknown keys are refused.
        """
        if not isinstance(data, Mapping):
            raise InvalidMessage("invalid_message", "a message must be an object.")
        if not _MESSAGE_KEYS.issuperset(data):
            unknown = sorted(set(data) - _MESSAGE_KEYS)
            raise InvalidMessage(
                "unknown_field",
                f"unknown message field(s): {', '.join(unknown)}.",
                field=unknown[0],
            )
        raw_calls = data.get("tool_calls")
        tool_calls: tuple[ToolCall, ...] | None = None
        if raw_calls is not None:
            if not isinstance(raw_calls, list | tuple):
                raise InvalidMessage(
                    "invalid_tool_call", "tool_calls must be a list.", field="tool_calls"
                )
            calls = []
            for index, raw in enumerate(raw_calls):
                try:
                    calls.append(raw if isinstance(raw, ToolCall) else ToolCall.from_dict(raw))
                except InvalidMessage as exc:
                    raise exc.within(f"tool_calls[{index}]") from None
            tool_calls = tuple(calls)
        return cls(
            role=_role(data.get("role")),
            content=data.get("content"),  # type: ignore[arg-type]
            tool_calls=tool_calls,
            tool_call_id=data.get("tool_call_id"),
            is_error=data.get("is_error", False),
            reasoning=data.get("reasoning"),
        )


def _reasoning(parts: Sequence[Reasoning] | None) -> tuple[Reasoning, ...] | None:
    # The named constructors take an empty list for "no reasoning".
    return tuple(parts) if parts else None


MessageInput = ChatMessage | Mapping[str, Any]
"""What public seams accept: a ``ChatMessage`` or its dict form."""


def as_chat_messages(messages: Iterable[MessageInput]) -> list[ChatMessage]:
    """Normalise messages: ``ChatMessage`` passes through, dicts go through ``from_dict``.

    Errors name the message index in ``field`` (``messages[2].content``).
    """
    result: list[ChatMessage] = []
    for index, message in enumerate(messages):
        if isinstance(message, ChatMessage):
            result.append(message)
            continue
        try:
            result.append(ChatMessage.from_dict(message))
        except InvalidMessage as exc:
            raise exc.within(f"messages[{index}]") from None
    return result
