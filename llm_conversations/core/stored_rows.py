"""Chat messages from the columns of a stored row.

This module imports nothing from Django and nothing from httpx. Two readers of
the same columns (``role``, ``content``, ``tool_calls``, ``tool_call_id``,
``is_error``, ``content_parts``, ``reasoning``, JSON already decoded):

- :func:`chat_message_from_row` validates everything, as every other way of
  building a message does. It reads values that no database has checked yet
  (``Message.clean()``, an unsaved row).
- :func:`chat_message_from_checked_row` is for rows read back from the
  database, whose constraints and triggers hold every rule of one row. It
  builds the value objects without running their validation again, and keeps
  only type checks that cost a comparison each: the kind of every value, the
  shape of each stored call, and which role may carry what. A row that fails
  one (written past the database's checks, or JSON of another type) goes
  through :func:`chat_message_from_row`, which raises :class:`InvalidMessage`
  naming what is wrong. Rows with content parts or reasoning always do:
  their value objects are built by reading them anyway.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from llm_conversations.core.messages import ChatMessage, Role, ToolCall

__all__ = [
    "chat_message_from_checked_row",
    "chat_message_from_row",
    "chat_messages_from_checked_rows",
]


def chat_message_from_row(
    role: str,
    content: str,
    tool_calls: list[dict[str, Any]] | None,
    tool_call_id: str | None,
    is_error: bool,
    content_parts: list[dict[str, Any]] | None = None,
    reasoning: list[dict[str, Any]] | None = None,
) -> ChatMessage:
    """Build and validate the value object of stored columns (in ``MESSAGE_COLUMNS`` order).

    ``content_parts``, when set, is the message's content (its text column
    is derived from it); ``reasoning`` the stored reasoning parts. Raises
    :class:`InvalidMessage`.

    Stored calls are in ``ToolCall.to_stored()`` form, so they take a direct path;
    a row of any other shape goes through ``from_dict`` for its precise error.
    """
    calls: tuple[ToolCall, ...] | None = None
    if tool_calls is not None:
        try:
            calls = tuple(
                ToolCall(call["id"], call["function"]["name"], arguments, call["type"])
                if type(arguments := call["function"]["arguments"]) is dict
                else ToolCall.from_dict(call)
                for call in tool_calls
            )
        except (KeyError, TypeError):
            return ChatMessage.from_dict(
                {
                    "role": role,
                    "content": content if content_parts is None else content_parts,
                    "tool_calls": tool_calls,
                    "tool_call_id": tool_call_id,
                    "is_error": is_error,
                    "reasoning": reasoning,
                }
            )
    content_value: Any = content if content_parts is None else content_parts
    return ChatMessage(role, content_value, calls, tool_call_id, is_error, reasoning=reasoning)  # type: ignore[arg-type]


# Slots set directly: a frozen dataclass refuses plain assignment, and its
# __init__ would run __post_init__, the validation this path spares.
_new = object.__new__


def _setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The slot's own setter, which a frozen dataclass's ``__setattr__`` does not guard."""
    setter: Callable[[Any, Any], None] = vars(cls)[name].__set__
    return setter


_role = _setter(ChatMessage, "role")
_content = _setter(ChatMessage, "content")
_tool_calls = _setter(ChatMessage, "tool_calls")
_tool_call_id = _setter(ChatMessage, "tool_call_id")
_is_error = _setter(ChatMessage, "is_error")
_parts = _setter(ChatMessage, "parts")
_reasoning = _setter(ChatMessage, "reasoning")
_call_id = _setter(ToolCall, "id")
_call_name = _setter(ToolCall, "name")
_call_arguments = _setter(ToolCall, "arguments")
_call_type = _setter(ToolCall, "type")
_call_raw = _setter(ToolCall, "raw_arguments")

_ROLES: dict[object, Role] = {role.value: role for role in Role}
# A boolean column reads as 0/1 on SQLite; anything else is not a boolean.
_BOOLEANS: dict[object, bool] = {False: False, True: True}
_TEXT_REQUIRED = (Role.SYSTEM, Role.USER)
_TOOL = Role.TOOL
_ASSISTANT = Role.ASSISTANT


def chat_message_from_checked_row(
    role: str,
    content: str,
    tool_calls: list[dict[str, Any]] | None,
    tool_call_id: str | None,
    is_error: bool,
    content_parts: list[dict[str, Any]] | None = None,
    reasoning: list[dict[str, Any]] | None = None,
) -> ChatMessage:
    """The value object of a row read from the database (columns as for
    :func:`chat_message_from_row`), built without validating it again.

    Raises :class:`InvalidMessage` for a row that breaks the rules the
    database enforces (see the module's docstring).
    """
    if content_parts is None and reasoning is None:
        message = _checked(role, content, tool_calls, tool_call_id, is_error)
        if message is not None:
            return message
    return chat_message_from_row(
        role, content, tool_calls, tool_call_id, is_error, content_parts, reasoning
    )


def chat_messages_from_checked_rows(rows: Iterable[Sequence[Any]]) -> list[ChatMessage]:
    """:func:`chat_message_from_checked_row` of each row as a database cursor returns it:
    the columns in ``MESSAGE_COLUMNS`` order, the JSON ones as JSON text (or ``None``).

    A history is loaded through here, hence one loop with no call per row but
    the checks'.
    """
    loads = json.loads
    messages: list[ChatMessage] = []
    append = messages.append
    for role, content, calls, call_id, is_error, parts, reasoning in rows:
        decoded_calls = None if calls is None else loads(calls)
        if parts is None and reasoning is None:
            message = _checked(role, content, decoded_calls, call_id, is_error)
            if message is not None:
                append(message)
                continue
        append(
            chat_message_from_row(
                role,
                content,
                decoded_calls,
                call_id,
                _BOOLEANS.get(is_error, is_error),
                None if parts is None else loads(parts),
                None if reasoning is None else loads(reasoning),
            )
        )
    return messages


def _checked(
    role: object, content: object, tool_calls: object, tool_call_id: object, is_error: object
) -> ChatMessage | None:
    """The message, or ``None`` when a check fails (the caller then validates it)."""
    try:
        kind = _ROLES[role]
        error = _BOOLEANS[is_error]
    except (KeyError, TypeError):
        return None
    if type(content) is not str or (not content and kind in _TEXT_REQUIRED):
        return None
    if kind is _TOOL:
        if type(tool_call_id) is not str or not tool_call_id:
            return None
    elif tool_call_id is not None or error:
        return None
    calls = None
    if tool_calls is not None:
        if kind is not _ASSISTANT or type(tool_calls) is not list:
            return None
        calls = _checked_calls(tool_calls)
        if calls is None:
            return None
    message = _new(ChatMessage)
    _role(message, kind)
    _content(message, content)
    _tool_calls(message, calls)
    _tool_call_id(message, tool_call_id)
    _is_error(message, error)
    _parts(message, None)
    _reasoning(message, None)
    return message


def _checked_calls(stored: list[Any]) -> tuple[ToolCall, ...] | None:
    """Stored calls (``ToolCall.to_stored()`` form, arguments an object) as ``ToolCall``s;
    ``None`` when one is not of that shape, or the turn has none or an id twice.

    Malformed calls (arguments kept as text) are rare: they take the validating path.
    """
    calls: list[ToolCall] = []
    for data in stored:
        try:
            function = data["function"]
            call_id = data["id"]
            name = function["name"]
            arguments = function["arguments"]
            kind = data["type"]
        except (KeyError, TypeError, IndexError):
            return None
        if (
            type(arguments) is not dict
            or type(call_id) is not str
            or type(name) is not str
            or not call_id
            or not name
            or kind != "function"
        ):
            return None
        call = _new(ToolCall)
        _call_id(call, call_id)
        _call_name(call, name)
        _call_arguments(call, arguments)
        _call_type(call, kind)
        _call_raw(call, None)
        calls.append(call)
    if not calls or (len(calls) > 1 and len({call.id for call in calls}) != len(calls)):
        return None
    return tuple(calls)
