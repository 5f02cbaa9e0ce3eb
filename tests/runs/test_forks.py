"""Forks, edits and regenerations: copies of a history; the original never changes."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from llm_conversations.conversations import (
    append_completion,
    append_messages,
    create_conversation,
    load_messages,
)
from llm_conversations.core.completions import CompletionResponse, Usage
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.exceptions import ForkError
from llm_conversations.models import Conversation, Message, Run, RunStatus
from llm_conversations.providers import EchoProvider, ProviderNotConfigured
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.forks import edit_message, fork, regenerate
from tests.support import loop_tools

pytestmark = pytest.mark.django_db

SETTINGS = {
    "DEFAULT_PROVIDER": "echo",
    "PROVIDERS": {
        "echo": {"BACKEND": "echo", "MODEL": "echo"},
        "other": {"BACKEND": "echo", "MODEL": "echo-2"},
    },
}


@pytest.fixture(autouse=True)
def providers(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = SETTINGS


def service() -> ToolLoopService:
    return ToolLoopService(tools=loop_tools.registry())


def history_with_tools() -> Conversation:
    """0 system, 1 user, 2 assistant calls a+b, 3 tool a, 4 tool b, 5 assistant, 6 user,
    7 assistant."""
    conversation = create_conversation(
        owner=None,
        title="Trip",
        messages=[
            ChatMessage.system("Be brief."),
            ChatMessage.user("Weather?"),
            ChatMessage.assistant_tool_calls(
                [ToolCall("a", "get_weather", {"city": "Paris"}), ToolCall("b", "get_time", {})]
            ),
            ChatMessage.tool_result("a", "18 C"),
            ChatMessage.tool_result("b", "09:00"),
        ],
    )
    append_completion(
        conversation,
        CompletionResponse(content="Mild.", provider="echo", model="echo", usage=Usage(3, 4, 7)),
        metadata={"kept": True},
    )
    append_messages(conversation, [ChatMessage.user("Thanks"), ChatMessage.assistant("Welcome")])
    conversation.refresh_from_db()
    return conversation


def snapshot(conversation: Conversation) -> tuple[Any, ...]:
    row = Conversation.objects.values().get(pk=conversation.pk)
    messages = list(Message.objects.filter(conversation=conversation).order_by("position").values())
    runs = list(Run.objects.filter(conversation=conversation).values())
    return row, messages, runs


def ids(conversation: Conversation) -> list[uuid.UUID]:
    return list(
        Message.objects.filter(conversation=conversation)
        .order_by("position")
        .values_list("pk", flat=True)
    )


def test_a_fork_copies_the_history_through_the_message() -> None:
    source = history_with_tools()
    before = snapshot(source)
    copy = fork(source, ids(source)[5], title="Branch")
    assert snapshot(source) == before
    assert (copy.forked_from_id, copy.forked_at_position, copy.message_count) == (source.pk, 6, 6)
    assert copy.owner_id == source.owner_id
    assert (copy.title, copy.title_source) == ("Branch", "user")
    assert load_messages(copy) == load_messages(source)[:6]
    copied = Message.objects.get(conversation=copy, position=5)
    original = Message.objects.get(conversation=source, position=5)
    assert (copied.provider, copied.total_tokens, copied.metadata) == ("echo", 7, {"kept": True})
    assert copied.created_at == original.created_at
    assert copied.pk != original.pk
    assert copied.pk.version == 4
    assert set(ids(copy)).isdisjoint(ids(source))
    assert list(source.forks.all()) == [copy]


def test_a_whole_fork_and_a_fork_of_an_empty_conversation() -> None:
    source = history_with_tools()
    assert load_messages(fork(source)) == load_messages(source)
    empty = fork(create_conversation(title="Empty"))
    assert (empty.message_count, empty.title, empty.title_source) == (0, "Empty (fork)", "")


def test_forks_are_named_after_their_source_and_numbered() -> None:
    source = history_with_tools()  # "Trip"
    Conversation.objects.filter(pk=source.pk).update(title_source="auto")
    source.refresh_from_db()
    first, second, third = fork(source), fork(source, ids(source)[1]), fork(source)
    assert [c.title for c in (first, second, third)] == [
        "Trip (fork)",
        "Trip (fork 2)",
        "Trip (fork 3)",
    ]
    assert {c.title_source for c in (first, second, third)} == {"auto"}
    # A fork of a fork is told apart from both.
    assert fork(first).title == "Trip (fork) (fork)"
    # An untitled source: an untitled fork, for an automatic title after its first run.
    untitled = fork(create_conversation())
    assert (untitled.title, untitled.title_source) == ("", "")
    # Cut to fit the column, the suffix kept.
    long = fork(create_conversation(title="x" * 200))
    assert long.title == "x" * 193 + " (fork)"
    assert Conversation.objects.get(pk=long.pk).title == long.title


@pytest.mark.parametrize("position", [2, 3])
def test_a_fork_inside_a_tool_group_is_refused(position: int) -> None:
    source = history_with_tools()
    before = snapshot(source)
    with pytest.raises(ForkError) as caught:
        fork(source, ids(source)[position])
    assert (caught.value.code, caught.value.field) == ("inside_tool_group", "message_id")
    assert snapshot(source) == before
    assert Conversation.objects.count() == 1


def test_a_fork_at_the_groups_edges_is_allowed() -> None:
    source = history_with_tools()
    assert fork(source, ids(source)[1]).message_count == 2
    assert fork(source, ids(source)[4]).message_count == 5


def test_a_message_of_another_conversation_is_unknown() -> None:
    source, other = history_with_tools(), create_conversation(messages=[ChatMessage.user("x")])
    for message_id in (ids(other)[0], "not-an-id"):
        with pytest.raises(ForkError, match="not a message") as caught:
            fork(source, message_id)
        assert caught.value.code == "unknown_message"


def test_edit_forks_before_the_user_turn_and_answers_the_new_text() -> None:
    source = history_with_tools()
    before = snapshot(source)
    run = edit_message(service(), source, ids(source)[6], "Thanks a lot")
    assert snapshot(source) == before
    copy = Conversation.objects.get(pk=run.conversation_id)
    assert (copy.forked_from_id, copy.forked_at_position) == (source.pk, 6)
    assert run.status == RunStatus.QUEUED
    service().execute(run)
    assert [m.content for m in load_messages(copy)[6:]] == ["Thanks a lot", "Thanks a lot"]
    assert load_messages(copy)[:6] == load_messages(source)[:6]


def test_edit_of_the_first_user_turn_keeps_the_system_turn_only() -> None:
    source = history_with_tools()
    run = service().execute(edit_message(service(), source, ids(source)[1], "Hello"))
    copy = run.conversation
    assert [m.role for m in load_messages(copy)] == ["system", "user", "assistant"]


@pytest.mark.parametrize("position", [0, 2, 3, 5])
def test_edit_refuses_anything_but_a_user_turn(position: int) -> None:
    source = history_with_tools()
    with pytest.raises(ForkError) as caught:
        edit_message(service(), source, ids(source)[position], "x")
    assert caught.value.code == "not_a_user_message"


@pytest.mark.parametrize("position", [2, 5])
def test_regenerate_answers_the_same_user_turn_again(position: int) -> None:
    source = history_with_tools()
    before = snapshot(source)
    run = regenerate(service(), source, ids(source)[position], provider="other")
    assert snapshot(source) == before
    assert (run.provider, run.model) == ("other", "echo-2")
    run = service().execute(run)
    copy = run.conversation
    assert copy.forked_at_position == 1
    history = load_messages(copy)
    assert history[:2] == load_messages(source)[:2]
    assert [m.role for m in history] == ["system", "user", "assistant"]
    assert history[2].content == "Weather?"  # the echo backend answers with the question


def test_regenerate_of_the_last_answer_keeps_the_earlier_exchange() -> None:
    source = history_with_tools()
    run = service().execute(regenerate(service(), source, ids(source)[7]))
    assert run.conversation.forked_at_position == 6
    assert [m.content for m in load_messages(run.conversation)[6:]] == ["Thanks", "Thanks"]


def test_regenerate_refuses_other_turns_and_answers_without_a_question() -> None:
    source = history_with_tools()
    for position in (0, 1, 3):
        with pytest.raises(ForkError) as caught:
            regenerate(service(), source, ids(source)[position])
        assert caught.value.code == "not_an_assistant_message"
    lonely = create_conversation(messages=[ChatMessage.assistant("Hi, how can I help?")])
    with pytest.raises(ForkError) as caught:
        regenerate(service(), lonely, ids(lonely)[0])
    assert caught.value.code == "nothing_to_regenerate"


def test_a_refused_start_leaves_no_fork() -> None:
    source = history_with_tools()
    with pytest.raises(ProviderNotConfigured):
        regenerate(service(), source, ids(source)[7], provider="missing")
    with pytest.raises(ProviderNotConfigured):
        edit_message(service(), source, ids(source)[6], "x", provider="missing")
    assert Conversation.objects.count() == 1


def test_a_source_with_an_active_run_can_be_forked_up_to_its_stored_turns() -> None:
    source = history_with_tools()
    run = service().start(source, loop_tools_calls())
    source.refresh_from_db()
    before = snapshot(source)
    copy = fork(source)
    assert snapshot(source) == before
    assert copy.message_count == source.message_count == 9
    assert not Run.objects.filter(conversation=copy).exists()
    # The source's run goes on; the fork does not see what it adds.
    service().execute(run)
    assert Message.objects.filter(conversation=copy).count() == 9
    assert Message.objects.filter(conversation=source).count() > 9


def loop_tools_calls() -> str:
    call = {"id": "c", "type": "function", "function": {"name": "get_time", "arguments": {}}}
    return json.dumps({"tool_calls": [call]})


def test_a_fork_outlives_its_source() -> None:
    source = history_with_tools()
    copy = fork(source)
    Conversation.objects.filter(pk=source.pk).delete()
    copy.refresh_from_db()
    assert (copy.forked_from_id, copy.forked_at_position) == (None, 8)
    assert copy.message_count == Message.objects.filter(conversation=copy).count() == 8


def fork_queries(length: int) -> int:
    source = create_conversation(messages=[ChatMessage.user(f"m{n}") for n in range(length)])
    with CaptureQueriesContext(connection) as queries:
        copy = fork(source.pk)
    assert Message.objects.filter(conversation=copy).count() == length
    return len(queries)


def test_forking_costs_the_same_queries_at_any_length() -> None:
    short, long = fork_queries(3), fork_queries(5000)
    # Read the source, read the tail for the tool-group rule, insert the
    # conversation, copy the rows and their attachment links (+ savepoint and release).
    assert short == long
    assert long <= 7


def test_a_service_built_with_a_provider_instance_regenerates_with_it() -> None:
    source = history_with_tools()
    run = regenerate(ToolLoopService(EchoProvider(model="own")), source, ids(source)[7])
    assert run.model == "own"
