"""Messages from stored columns: the checked path gives what the validating one gives,
and a row that breaks a rule raises on both."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind, ToolCall
from llm_conversations.core.stored_rows import (
    chat_message_from_checked_row,
    chat_message_from_row,
    chat_messages_from_checked_rows,
)
from llm_conversations.exceptions import InvalidMessage

CALL: dict[str, Any] = {"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}


def columns(message: ChatMessage) -> tuple[Any, ...]:
    """The stored columns of ``message``, JSON decoded, in ``MESSAGE_COLUMNS`` order."""
    stored = message.to_stored()
    parts = stored["content"] if message.parts is not None else None
    return (
        stored["role"],
        message.content,
        stored["tool_calls"],
        stored["tool_call_id"],
        stored["is_error"],
        parts,
        stored.get("reasoning"),
    )


MESSAGES = [
    ChatMessage.system("Be brief."),
    ChatMessage.user("hi"),
    ChatMessage.user([{"type": "text", "text": "look"}, {"type": "image", "attachment_id": "x"}]),
    ChatMessage.assistant(""),
    ChatMessage.assistant(
        "hello", reasoning=[Reasoning("openai", ReasoningKind.SUMMARY, text="thinking")]
    ),
    ChatMessage.assistant_tool_calls(
        [ToolCall("a", "f", {"x": [1, {"y": None}]}), ToolCall("b", "g")], "calling"
    ),
    ChatMessage.assistant_tool_calls([ToolCall.parse(id="m", name="f", arguments="{oops")]),
    ChatMessage.tool_result("a", "1"),
    ChatMessage.tool_result("b", "failed", is_error=True),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: f"{m.role}")
def test_the_checked_path_builds_what_the_validating_one_builds(message: ChatMessage) -> None:
    checked = chat_message_from_checked_row(*columns(message))
    assert checked == chat_message_from_row(*columns(message)) == message
    assert type(checked.role) is type(message.role)
    if message.parts is None:  # the wire form of an attachment needs its bytes
        assert checked.to_wire() == message.to_wire()
    assert checked.to_stored() == message.to_stored()
    for call, original in zip(checked.tool_calls or (), message.tool_calls or (), strict=True):
        assert (call.malformed, call.arguments_json) == (
            original.malformed,
            original.arguments_json,
        )


def test_rows_as_a_cursor_returns_them_json_as_text_and_booleans_as_numbers() -> None:
    rows = []
    for message in MESSAGES:
        role, content, calls, call_id, is_error, parts, reasoning = columns(message)
        text = [None if value is None else json.dumps(value) for value in (calls, parts, reasoning)]
        rows.append((role, content, text[0], call_id, int(is_error), text[1], text[2]))
    loaded = chat_messages_from_checked_rows(rows)
    assert loaded == MESSAGES
    assert [type(message.is_error) for message in loaded] == [bool] * len(MESSAGES)


CORRUPT = {
    "invalid_role": ("robot", "x", None, None, False),
    "invalid_content": ("user", 5, None, None, False),
    "missing_content": ("user", "", None, None, False),
    "invalid_is_error": ("tool", "x", None, "a", "yes"),
    "is_error_not_allowed": ("user", "x", None, None, True),
    "tool_call_id_not_allowed": ("user", "x", None, "a", False),
    "missing_tool_call_id": ("tool", "x", None, "", False),
    "tool_calls_not_allowed": ("user", "x", [CALL], None, False),
    "empty_tool_calls": ("assistant", "", [], None, False),
    "invalid_tool_call": ("assistant", "", "not a list", None, False),
    "invalid_tool_call_id": ("assistant", "", [{**CALL, "id": 5}], None, False),
    "invalid_tool_name": (
        "assistant",
        "",
        [{**CALL, "function": {"name": "", "arguments": {}}}],
        None,
        False,
    ),
    "invalid_tool_call_type": ("assistant", "", [{**CALL, "type": "other"}], None, False),
    "duplicate_tool_call_id": ("assistant", "", [CALL, CALL], None, False),
}


@pytest.mark.parametrize(("code", "row"), CORRUPT.items(), ids=list(CORRUPT))
def test_a_row_that_breaks_a_rule_raises_on_the_checked_path(
    code: str, row: tuple[Any, ...]
) -> None:
    with pytest.raises(InvalidMessage) as validated:
        chat_message_from_row(*row)
    with pytest.raises(InvalidMessage) as checked:
        chat_message_from_checked_row(*row)
    assert checked.value.code == validated.value.code == code
    assert checked.value.field == validated.value.field
