"""Changing a conversation's last turn (``tail.change_last_turn``) and appending turns made
elsewhere with their columns (``store.append_turns``)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.conversations.feedback import rate_message
from llm_conversations.conversations.lifecycle import trash_conversation
from llm_conversations.conversations.store import Turn, append_turns
from llm_conversations.conversations.tail import change_last_turn
from llm_conversations.core.completions import FinishReason, Usage
from llm_conversations.core.messages import ChatMessage, InvalidMessage, ToolCall
from llm_conversations.exceptions import ConversationBusy, ConversationTrashed
from llm_conversations.models import ConversationSummary, Message, Run, RunStatus

pytestmark = pytest.mark.django_db

CALLS = ChatMessage.assistant_tool_calls(
    [ToolCall("a", "get_time"), ToolCall("b", "get_weather", {"city": "Oslo"})], "Checking."
)


def conversation_with_calls() -> object:
    return create_conversation(messages=[ChatMessage.user("Time and weather?"), CALLS])


def test_a_changed_last_turn_keeps_its_row_and_its_ratings() -> None:
    owner = get_user_model().objects.create_user("alice")
    conversation = create_conversation(owner=owner, messages=[ChatMessage.user("Hi"), CALLS])
    row = Message.objects.get(position=1)
    rate_message(row, owner, 1)
    ConversationSummary.objects.create(
        conversation=conversation, end_position=2, content="Asked for both.", provider="echo"
    )

    fewer = ChatMessage.assistant_tool_calls([ToolCall("a", "get_time")], "Checking.")
    assert change_last_turn(conversation, lambda turn: fewer) == CALLS

    assert load_messages(conversation) == [ChatMessage.user("Hi"), fewer]
    kept = Message.objects.get(position=1)
    assert kept.pk == row.pk
    assert kept.feedback.count() == 1  # type: ignore[attr-defined]
    assert not ConversationSummary.objects.exists()


def test_a_removed_last_turn_leaves_positions_gap_free_and_keeping_it_writes_nothing() -> None:
    conversation = create_conversation(messages=[ChatMessage.user("Hi"), CALLS])
    before = Message.objects.get(position=1).created_at
    assert change_last_turn(conversation, lambda turn: turn) == CALLS
    assert Message.objects.get(position=1).created_at == before
    assert change_last_turn(conversation, lambda turn: None) == CALLS
    conversation.refresh_from_db()
    assert conversation.message_count == 1
    assert load_messages(conversation) == [ChatMessage.user("Hi")]
    assert change_last_turn(create_conversation(), lambda turn: None) is None


def test_a_replacement_is_checked_as_an_append_and_nothing_changes_when_refused() -> None:
    conversation = create_conversation(
        messages=[ChatMessage.user("Hi"), CALLS, ChatMessage.tool_result("a", "noon")]
    )
    with pytest.raises(InvalidMessage) as info:
        change_last_turn(conversation, lambda turn: ChatMessage.tool_result("nowhere", "x"))
    assert info.value.code == "unexpected_tool_result"
    with pytest.raises(InvalidMessage) as info:
        change_last_turn(conversation, lambda turn: ChatMessage.tool_result("b", "\x00"))
    assert info.value.code == "invalid_text"
    assert load_messages(conversation)[-1] == ChatMessage.tool_result("a", "noon")


def test_the_last_turn_does_not_change_while_a_run_is_active_or_in_the_trash() -> None:
    conversation = create_conversation(messages=[ChatMessage.user("Hi")])
    run = Run.objects.create(conversation=conversation, status=RunStatus.RUNNING)
    with pytest.raises(ConversationBusy):
        change_last_turn(conversation, lambda turn: None)
    run.status = RunStatus.COMPLETED
    run.save()
    trash_conversation(conversation)
    with pytest.raises(ConversationTrashed):
        change_last_turn(conversation, lambda turn: None)
    assert load_messages(conversation) == [ChatMessage.user("Hi")]


def test_appended_turns_keep_their_model_usage_and_finish_reason() -> None:
    conversation = create_conversation()
    rows = append_turns(
        conversation,
        [
            Turn(ChatMessage.user("Hi"), metadata={"from": "elsewhere"}),
            Turn(
                ChatMessage.assistant("Hello."),
                model="claude-test",
                provider="anthropic",
                usage=Usage(12, 3, cached_tokens=8),
                finish_reason=FinishReason.STOP,
            ),
        ],
    )
    assert [row.position for row in rows] == [0, 1]
    answer = Message.objects.get(position=1)
    assert (answer.model, answer.provider, answer.finish_reason) == (
        "claude-test",
        "anthropic",
        "stop",
    )
    assert (
        answer.input_tokens,
        answer.output_tokens,
        answer.total_tokens,
        answer.cached_tokens,
    ) == (
        12,
        3,
        15,
        8,
    )
    assert answer.cost is None
    assert Message.objects.get(position=0).metadata == {"from": "elsewhere"}


def test_usage_on_a_turn_no_model_made_is_refused() -> None:
    conversation = create_conversation()
    with pytest.raises(InvalidMessage) as info:
        append_turns(conversation, [Turn(ChatMessage.user("Hi"), usage=Usage(1, 1))])
    assert (info.value.code, info.value.field) == ("usage_not_allowed", "messages[0]")
    assert not Message.objects.exists()
