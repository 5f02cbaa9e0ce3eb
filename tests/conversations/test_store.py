"""The conversation store: loading, appending, integrity, cost and concurrency."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from llm_conversations.conversations import (
    append_completion,
    append_messages,
    create_conversation,
    delete_conversation,
    load_messages,
    unanswered_call_ids,
)
from llm_conversations.conversations.store import append_for_run
from llm_conversations.conversations.tail import remove_run_turns
from llm_conversations.core.completions import CompletionResponse, Usage
from llm_conversations.core.messages import ChatMessage, InvalidMessage, ToolCall
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import ConversationBusy
from llm_conversations.models import Conversation, ConversationSummary, Message, Run, RunStatus
from llm_conversations.runs import ToolLoopService
from tests.conftest import requires_postgresql, run_together

pytestmark = pytest.mark.django_db


def test_round_trip_through_the_database_is_exact(history: list[ChatMessage]) -> None:
    conversation = create_conversation(title="t", messages=history)
    assert load_messages(conversation) == history
    assert load_messages(str(conversation.pk)) == history
    assert conversation.message_count == len(history)
    positions = list(conversation.messages.values_list("position", flat=True))
    assert positions == list(range(len(history)))


def test_dict_messages_are_validated_on_entry() -> None:
    conversation = create_conversation()
    append_messages(conversation, [{"role": "user", "content": "hi"}])
    with pytest.raises(InvalidMessage) as info:
        append_messages(
            conversation, [{"role": "user", "content": "ok"}, {"role": "tool", "content": "x"}]
        )
    assert info.value.field == "messages[1].tool_call_id"
    assert load_messages(conversation) == [ChatMessage.user("hi")]


def test_loading_is_one_query(history: list[ChatMessage]) -> None:
    conversation = create_conversation(messages=history * 1)
    with CaptureQueriesContext(connection) as queries:
        load_messages(conversation.pk)
    assert len(queries) == 1


@contextmanager
def checks_off() -> Iterator[None]:
    """Let the test write rows past the database's constraints and triggers, as a
    restore without them or a hand-made fix might (undone with the test's transaction)."""
    table = Message._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA ignore_check_constraints = ON")
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [table]
            )
            for (name,) in cursor.fetchall():
                cursor.execute(f'DROP TRIGGER "{name}"')
        else:
            # Deferred foreign key checks would keep the table from being altered.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET LOCAL session_replication_role = replica")  # no triggers
            cursor.execute(
                "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'c'",
                [table],
            )
            for (name,) in cursor.fetchall():
                cursor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"')
    try:
        yield
    finally:
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA ignore_check_constraints = OFF")


CALL: dict[str, Any] = {"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}
CORRUPTIONS: dict[str, tuple[int, dict[str, Any]]] = {
    # code: (position of the row, columns written past the database's checks)
    "invalid_role": (0, {"role": "robot"}),
    "missing_content": (0, {"content": ""}),
    "tool_calls_not_allowed": (0, {"tool_calls": [CALL]}),
    "tool_call_id_not_allowed": (0, {"tool_call_id": "a"}),
    "is_error_not_allowed": (0, {"is_error": True}),
    "invalid_tool_call": (1, {"tool_calls": {"id": "a"}}),
    "empty_tool_calls": (1, {"tool_calls": []}),
    "invalid_tool_call_id": (1, {"tool_calls": [{**CALL, "id": ""}]}),
    "duplicate_tool_call_id": (1, {"tool_calls": [CALL, CALL]}),
    "missing_tool_call_id": (2, {"tool_call_id": None}),
    "invalid_content": (2, {"content_parts": {"type": "text", "text": "x"}}),
}


@pytest.mark.parametrize(("code", "corruption"), CORRUPTIONS.items(), ids=list(CORRUPTIONS))
def test_a_row_stored_past_the_databases_checks_raises_on_load(
    code: str, corruption: tuple[int, dict[str, Any]]
) -> None:
    conversation = create_conversation(
        messages=[
            ChatMessage.user("hi"),
            ChatMessage.assistant_tool_calls([ToolCall("a", "f")]),
            ChatMessage.tool_result("a", "1"),
        ]
    )
    position, columns = corruption
    with checks_off():
        Message.objects.filter(conversation=conversation, position=position).update(**columns)
    with pytest.raises(InvalidMessage) as info:
        load_messages(conversation)
    assert info.value.code == code


def test_an_invalid_sequence_stores_nothing() -> None:
    conversation = create_conversation(
        messages=[ChatMessage.user("hi"), ChatMessage.assistant_tool_calls([ToolCall("a", "f")])]
    )
    with pytest.raises(InvalidMessage) as info:
        append_messages(conversation, [ChatMessage.user("again")])
    assert info.value.code == "unanswered_tool_calls"
    with pytest.raises(InvalidMessage) as info:
        append_messages(
            conversation, [ChatMessage.tool_result("a", "1"), ChatMessage.tool_result("zz", "1")]
        )
    assert info.value.code == "unexpected_tool_result"
    assert Message.objects.count() == 2
    conversation.refresh_from_db()
    assert conversation.message_count == 2
    assert unanswered_call_ids(conversation) == ("a",)


def test_results_can_be_appended_one_by_one() -> None:
    conversation = create_conversation(
        messages=[
            ChatMessage.user("hi"),
            ChatMessage.assistant_tool_calls([ToolCall("a", "f"), ToolCall("b", "g")]),
        ]
    )
    append_messages(conversation, [ChatMessage.tool_result("b", "2")])
    assert unanswered_call_ids(conversation) == ("a",)
    append_messages(
        conversation, [ChatMessage.tool_result("a", "1"), ChatMessage.assistant("done")]
    )
    assert unanswered_call_ids(conversation) == ()
    assert [m.role for m in load_messages(conversation)] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


def test_append_completion_stores_provider_model_and_usage() -> None:
    conversation = create_conversation(messages=[ChatMessage.user("hi")])
    response = CompletionResponse(
        "",
        (ToolCall("a", "f", {}),),
        usage=Usage(10, 5, cached_tokens=4),
        model="m-1",
        provider="echo",
    )
    row = append_completion(conversation, response)
    row.refresh_from_db()
    assert (
        row.provider,
        row.model,
        row.input_tokens,
        row.output_tokens,
        row.total_tokens,
        row.cached_tokens,
    ) == (
        "echo",
        "m-1",
        10,
        5,
        15,
        4,
    )
    assert row.to_chat_message() == response.to_message()


def test_unknown_conversation_raises_does_not_exist() -> None:
    with pytest.raises(Conversation.DoesNotExist):
        append_messages("00000000-0000-0000-0000-000000000000", [ChatMessage.user("x")])


TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT")


def test_append_costs_the_same_at_any_history_length() -> None:
    def append_statements(history_length: int) -> list[str]:
        conversation = create_conversation(
            messages=[
                ChatMessage.user(f"m{i}") if i % 2 == 0 else ChatMessage.assistant("a")
                for i in range(history_length)
            ]
        )
        with CaptureQueriesContext(connection) as queries:
            append_messages(conversation, [ChatMessage.user("next")])
        return [q["sql"] for q in queries]

    short, long = append_statements(2), append_statements(200)
    assert len(short) == len(long)
    # Count the new turn in (the UPDATE takes the lock), read the count and the
    # active run, read the tail, insert; in a savepoint and its release.
    statements = [sql for sql in long if not sql.startswith(TRANSACTION_CONTROL)]
    assert [sql.split()[0] for sql in statements] == ["UPDATE", "SELECT", "SELECT", "INSERT"]
    assert len(long) == 6


def test_a_refused_append_leaves_the_count_as_it_was() -> None:
    conversation = create_conversation(messages=[ChatMessage.user("hi")])
    run = Run.objects.create(conversation=conversation, status=RunStatus.RUNNING)
    with pytest.raises(ConversationBusy):
        append_messages(conversation, [ChatMessage.assistant("late")])
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)
    with pytest.raises(InvalidMessage) as info:
        append_messages(conversation.pk, [ChatMessage.tool_result("x", "1")])
    assert info.value.code == "unexpected_tool_result"
    conversation.refresh_from_db()
    assert conversation.message_count == Message.objects.filter(conversation=conversation).count()
    assert conversation.message_count == 1


def _running_run_after_a_call() -> tuple[Run, list[ChatMessage]]:
    """A conversation whose run holds a lease and left one call unanswered."""
    history = [ChatMessage.user("go"), ChatMessage.assistant_tool_calls([ToolCall("c1", "f")])]
    conversation = create_conversation(messages=history)
    run = Run.objects.create(
        conversation=conversation, status=RunStatus.RUNNING, lease_owner="here"
    )
    return run, history


def test_a_run_appends_its_results_after_its_history_in_three_statements() -> None:
    run, history = _running_run_after_a_call()
    with CaptureQueriesContext(connection) as queries:
        rows = append_for_run(
            run, [ChatMessage.tool_result("c1", "ok")], history=history, metadata=[{}]
        )
    assert rows is not None
    assert [row.position for row in rows] == [2]
    statements = [
        q["sql"].split()[0] for q in queries if not q["sql"].startswith(TRANSACTION_CONTROL)
    ]
    # The conversation's conditional update (its count and the run's lease), the insert.
    assert statements == ["UPDATE", "INSERT"]
    assert Conversation.objects.get(pk=run.conversation_id).message_count == 3


@pytest.mark.parametrize("change", ["cancelled", "taken over"])
def test_a_run_that_stopped_appends_nothing(change: str) -> None:
    run, history = _running_run_after_a_call()
    if change == "cancelled":
        Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED)
    else:
        Run.objects.filter(pk=run.pk).update(lease_owner="elsewhere")
    result = append_for_run(
        run, [ChatMessage.tool_result("c1", "late")], history=history, metadata=[{}]
    )
    assert result is None
    conversation = Conversation.objects.get(pk=run.conversation_id)
    assert (
        conversation.message_count == 2 == Message.objects.filter(conversation=conversation).count()
    )


def test_a_run_whose_history_is_stale_appends_after_what_is_stored() -> None:
    run, history = _running_run_after_a_call()
    # The run's copy lacks its last turn: the append reads the tail under the lock.
    rows = append_for_run(
        run, [ChatMessage.tool_result("c1", "ok")], history=history[:1], metadata=[{}]
    )
    assert rows is not None
    assert rows[0].position == 2
    assert not unanswered_call_ids(run.conversation_id)


def test_a_run_whose_history_is_stale_and_that_stopped_leaves_the_count() -> None:
    run, history = _running_run_after_a_call()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED)
    result = append_for_run(
        run, [ChatMessage.tool_result("c1", "late")], history=history[:1], metadata=[{}]
    )
    assert result is None
    assert Conversation.objects.get(pk=run.conversation_id).message_count == 2


@requires_postgresql
@pytest.mark.django_db(transaction=True)
def test_concurrent_appenders_get_gap_free_positions() -> None:
    conversation = create_conversation()
    workers, per_worker = 6, 10

    def work(n: int) -> None:
        for i in range(per_worker):
            append_messages(conversation.pk, [ChatMessage.user(f"{n}-{i}")])

    errors = [o for o in run_together(workers, work) if o is not None]
    assert errors == []
    positions = list(
        Message.objects.filter(conversation=conversation).values_list("position", flat=True)
    )
    assert positions == list(range(workers * per_worker))
    contents = {m.content for m in load_messages(conversation)}
    assert contents == {f"{n}-{i}" for n in range(workers) for i in range(per_worker)}
    conversation.refresh_from_db()
    assert conversation.message_count == workers * per_worker


def test_only_the_active_run_may_append_while_it_is_active() -> None:
    conversation = create_conversation(messages=[ChatMessage.user("hi")])
    run = Run.objects.create(conversation=conversation)
    with pytest.raises(ConversationBusy) as info:
        append_messages(conversation, [ChatMessage.assistant("sneaked in")])
    assert info.value.code == "conversation_busy"
    with pytest.raises(ConversationBusy):
        append_completion(conversation, CompletionResponse("late"))
    append_messages(conversation, [ChatMessage.assistant("the run's own turn")], run=run)
    other = Run.objects.create(conversation=create_conversation())
    with pytest.raises(ConversationBusy):
        append_messages(conversation, [ChatMessage.user("not this run's")], run=other)
    assert load_messages(conversation) == [
        ChatMessage.user("hi"),
        ChatMessage.assistant("the run's own turn"),
    ]
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)
    append_messages(conversation, [ChatMessage.user("after the run")])
    assert conversation.message_count == 3


def test_deleting_waits_for_the_active_run() -> None:
    conversation = create_conversation(messages=[ChatMessage.user("hi")])
    run = Run.objects.create(conversation=conversation, status=RunStatus.REQUIRES_ACTION)
    with pytest.raises(ConversationBusy):
        delete_conversation(conversation)
    assert Message.objects.filter(conversation=conversation).count() == 1
    Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED)
    delete_conversation(conversation.pk)
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not Run.objects.filter(pk=run.pk).exists()
    with pytest.raises(Conversation.DoesNotExist):
        delete_conversation(conversation.pk)


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (ChatMessage.tool_result("x" * 256, "r"), "messages[1].tool_call_id"),
        (
            ChatMessage.assistant_tool_calls([ToolCall("ok", "f"), ToolCall("y" * 256, "f")]),
            "messages[1].tool_calls[1].id",
        ),
    ],
)
def test_the_store_refuses_ids_longer_than_their_column(message: ChatMessage, field: str) -> None:
    conversation = create_conversation(messages=[ChatMessage.user("hi")])
    calls = ChatMessage.assistant_tool_calls([ToolCall("ok", "f")])
    with pytest.raises(InvalidMessage) as info:
        append_messages(conversation, [calls, message])
    assert (info.value.code, info.value.field) == ("invalid_tool_call_id", field)
    assert load_messages(conversation) == [ChatMessage.user("hi")]
    append_messages(conversation, [ChatMessage.assistant("x" * 256)])


def test_runs_read_offered_tools_in_either_stored_form() -> None:
    spec = ToolSpec("get_time", "The time.", {"type": "object", "properties": {}})
    # Rows written before the stored form kept OpenAI ``tools`` entries.
    for tools in ([spec.to_wire()], [spec.to_stored()]):
        run = Run.objects.create(conversation=create_conversation(), tools=tools)
        run.refresh_from_db()
        assert run.offered_tools == [spec]
        assert run.offered_tool_names == ["get_time"]


def test_removing_a_runs_turns_keeps_positions_gap_free_and_drops_covering_summaries() -> None:
    conversation = create_conversation(messages=[ChatMessage.user("kept")])
    kept = ConversationSummary.objects.create(
        conversation=conversation, end_position=1, content="s", provider="p", model="m"
    )
    run = ToolLoopService().send(conversation, "dropped")
    covering = ConversationSummary.objects.create(
        conversation=conversation, end_position=3, content="s", provider="p", model="m"
    )
    assert remove_run_turns(conversation, run) == 2
    assert [(m.position, m.content) for m in conversation.messages.order_by("position")] == [
        (0, "kept")
    ]
    conversation.refresh_from_db()
    assert conversation.message_count == 1
    assert list(ConversationSummary.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not ConversationSummary.objects.filter(pk=covering.pk).exists()


def test_a_runs_turns_are_not_removed_when_a_later_turn_is_not_its_own() -> None:
    conversation = create_conversation()
    run = ToolLoopService().send(conversation, "mine")
    append_messages(conversation, [ChatMessage.user("someone else's")])
    assert remove_run_turns(conversation, run) is None
    assert conversation.messages.count() == 3
