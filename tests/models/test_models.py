"""The message rules at the model layer: clean() and the database constraints."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind, ToolCall
from llm_conversations.models import Conversation, Message

pytestmark = pytest.mark.django_db

CALL = {"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}
REASONING = {"provider": "anthropic", "kind": "thinking", "text": "t", "data": "sig"}

# Each row breaks one rule that a single row can break; the database must refuse it.
INVALID_ROWS: list[tuple[dict[str, Any], str]] = [
    ({"role": "boss", "content": "x"}, "llmconv_message_role_valid"),
    (
        {"role": "user", "content": "x", "tool_calls": [CALL]},
        "llmconv_message_tool_calls_assistant_only",
    ),
    (
        {"role": "assistant", "content": "x", "tool_calls": []},
        "llmconv_message_tool_calls_nonempty",
    ),
    (
        {"role": "assistant", "content": "x", "tool_calls": {"0": CALL}},
        "llmconv_message_tool_calls_nonempty",
    ),
    *(
        (
            {"role": "assistant", "content": "", "tool_calls": calls},
            "llmconv_message_tool_calls_items",
        )
        for calls in [
            [{"name": "f"}],
            [{**CALL, "id": ""}],
            [{**CALL, "id": 7}],
            [{**CALL, "function": {"name": "", "arguments": {}}}],
            [{**CALL, "function": {"arguments": {}}}],
            [{**CALL, "type": "custom"}],
            [{**CALL, "function": {"name": "f", "arguments": [1]}}],
            [CALL, {"foo": 1}],
            [CALL, "junk"],
            [CALL, {**CALL, "function": {"name": "g", "arguments": {}}}],  # duplicate id
        ]
    ),
    (
        {"role": "user", "content": "x", "tool_call_id": "a"},
        "llmconv_message_tool_call_id_tool_only",
    ),
    ({"role": "tool", "content": "x"}, "llmconv_message_tool_call_id_required"),
    ({"role": "tool", "content": "x", "tool_call_id": ""}, "llmconv_message_tool_call_id_required"),
    ({"role": "user", "content": ""}, "llmconv_message_content_required"),
    ({"role": "system", "content": ""}, "llmconv_message_content_required"),
    ({"role": "system", "content": ""}, "llmconv_message_content_required"),
    (
        {"role": "user", "content": "x", "finish_reason": "stop"},
        "llmconv_message_usage_assistant_only",
    ),
    ({"role": "user", "content": "x", "is_error": True}, "llmconv_message_is_error_tool_only"),
    ({"role": "user", "content": "x", "model": "m"}, "llmconv_message_usage_assistant_only"),
    (
        {"role": "tool", "content": "x", "tool_call_id": "a", "input_tokens": 3},
        "llmconv_message_usage_assistant_only",
    ),
    (
        {"role": "user", "content": "x", "reasoning": [REASONING]},
        "llmconv_message_reasoning_assistant_only",
    ),
    ({"role": "assistant", "content": "x", "reasoning": []}, "llmconv_message_reasoning_nonempty"),
    (
        {"role": "assistant", "content": "x", "reasoning": REASONING},
        "llmconv_message_reasoning_nonempty",
    ),
    (
        {"role": "assistant", "content": "x", "reasoning": [{"kind": "thinking"}]},
        "llmconv_message_reasoning_nonempty",
    ),
]


@pytest.fixture
def conversation() -> Conversation:
    return Conversation.objects.create(title="t")


@pytest.mark.parametrize(("fields", "constraint"), INVALID_ROWS)
def test_database_refuses_invalid_rows_from_bulk_create(
    conversation: Conversation, fields: dict[str, Any], constraint: str
) -> None:
    with pytest.raises(IntegrityError) as info, transaction.atomic():
        Message.objects.bulk_create([Message(conversation=conversation, position=0, **fields)])
    assert constraint in str(info.value)
    assert not Message.objects.exists()


def test_database_refuses_an_invalid_update(conversation: Conversation) -> None:
    Message.objects.create(conversation=conversation, position=0, role="user", content="x")
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.update(tool_call_id="sneaky")
    assert Message.objects.get().tool_call_id is None


def test_database_refuses_an_invalid_tool_call_update(conversation: Conversation) -> None:
    Message.objects.create(
        conversation=conversation, position=0, role="assistant", content="", tool_calls=[CALL]
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.update(tool_calls=[CALL, CALL])
    assert Message.objects.get().tool_calls == [CALL]


def test_database_refuses_duplicate_positions(conversation: Conversation) -> None:
    Message.objects.create(conversation=conversation, position=0, role="user", content="x")
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(conversation=conversation, position=0, role="user", content="y")


VALID_MESSAGES = [
    ChatMessage.system("s"),
    ChatMessage.user("u"),
    ChatMessage.assistant("a"),
    ChatMessage.assistant("a", reasoning=[Reasoning.from_dict(REASONING)]),
    ChatMessage.assistant_tool_calls(
        [ToolCall("a", "f")],
        reasoning=[Reasoning("gemini", ReasoningKind.SIGNATURE, data="s", call_id="a")],
    ),
    ChatMessage.assistant_tool_calls(
        [ToolCall("a", "f", {"x": [1, {"y": None}]}), ToolCall("b", "g")]
    ),
    ChatMessage.assistant_tool_calls([ToolCall.parse(id="c", name="f", arguments='{"bad')], "text"),
    ChatMessage.tool_result("a", ""),
    ChatMessage.tool_result("b", "boom", is_error=True),
]


@pytest.mark.parametrize("message", VALID_MESSAGES)
def test_valid_messages_store_clean_and_round_trip(
    conversation: Conversation, message: ChatMessage
) -> None:
    row = Message(
        conversation=conversation, position=0, **Message.fields_from_chat_message(message)
    )
    row.full_clean()
    row.save()
    row.refresh_from_db()
    assert row.to_chat_message() == message


@pytest.mark.parametrize(
    ("fields", "field", "code"),
    [
        ({"role": "tool", "content": "x"}, "tool_call_id", "missing_tool_call_id"),
        ({"role": "user", "content": ""}, "content", "missing_content"),
        (
            {"role": "user", "content": "x", "tool_call_id": "a"},
            "tool_call_id",
            "tool_call_id_not_allowed",
        ),
        ({"role": "assistant", "content": "", "tool_calls": []}, "tool_calls", "empty_tool_calls"),
        (
            {"role": "assistant", "content": "", "tool_calls": [CALL, CALL]},
            "tool_calls",
            "duplicate_tool_call_id",
        ),
        (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{**CALL, "function": {"name": ""}}],
            },
            "tool_calls",
            "invalid_tool_name",
        ),
        ({"role": "user", "content": "x", "is_error": True}, "is_error", "is_error_not_allowed"),
        ({"role": "user", "content": "x", "model": "m"}, "__all__", "usage_not_allowed"),
        (
            {"role": "user", "content": "x", "reasoning": [REASONING]},
            "reasoning",
            "reasoning_not_allowed",
        ),
        ({"role": "assistant", "content": "x", "reasoning": []}, "reasoning", "empty_reasoning"),
        (
            {"role": "assistant", "content": "x", "reasoning": [{**REASONING, "kind": "x"}]},
            "reasoning",
            "invalid_reasoning",
        ),
        (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [CALL],
                "reasoning": [
                    {"provider": "gemini", "kind": "signature", "data": "s", "call_id": "zz"}
                ],
            },
            "reasoning",
            "invalid_reasoning",
        ),
    ],
)
def test_clean_reports_the_rule_on_its_field(
    conversation: Conversation, fields: dict[str, Any], field: str, code: str
) -> None:
    row = Message(conversation=conversation, position=0, **fields)
    with pytest.raises(ValidationError) as info:
        row.clean()
    errors = info.value.error_dict
    assert list(errors) == [field]
    assert errors[field][0].code == code


def test_conversation_ids_are_uuids(conversation: Conversation) -> None:
    assert len(str(conversation.pk)) == 36
    assert str(conversation) == "t"
