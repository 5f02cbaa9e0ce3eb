"""Importing django-ai-assistant's threads: its two tables made here as its 0.4.0
migrations make them (``Thread``, ``Message`` holding ``message_to_dict`` JSON),
filled as its ``save_django_messages`` fills them, then imported through the
importer and the ``import_conversations`` command."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection, models
from django.test.utils import CaptureQueriesContext
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    message_to_dict,
)

from llm_conversations.conversations import load_messages
from llm_conversations.conversations.transfer.importing import Importer
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.exceptions import InvalidImport
from llm_conversations.frameworks.django_ai_assistant import import_threads
from llm_conversations.models import Conversation, Message
from llm_conversations.users import User
from tests.support.stored_conversations import assert_holds_together

pytestmark = pytest.mark.django_db


class Thread(models.Model):
    """django-ai-assistant 0.4.0's ``Thread`` (migrations 0001, 0003, 0006)."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=255, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    assistant_id = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        app_label = "django_ai_assistant"
        db_table = "django_ai_assistant_thread"
        managed = False

    def __str__(self) -> str:
        return self.name


class AssistantMessage(models.Model):
    """django-ai-assistant 0.4.0's ``Message`` (migration 0003)."""

    id = models.BigAutoField(primary_key=True)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="+")
    message = models.JSONField()
    created_at = models.DateTimeField()

    class Meta:
        app_label = "django_ai_assistant"
        db_table = "django_ai_assistant_message"
        managed = False

    def __str__(self) -> str:
        return str(self.message)


@pytest.fixture
def tables() -> None:
    """The two tables, in the test's transaction (rolled back after it)."""
    # The editor's CREATE TABLE of each model, run in the transaction (SQLite's editor
    # itself refuses to run in one); the foreign keys' constraints are left out.
    editor = connection.schema_editor(collect_sql=True)
    editor.deferred_sql = []
    with connection.cursor() as cursor:
        for model in (Thread, AssistantMessage):
            sql, params = editor.table_sql(model)
            cursor.execute(sql, params)


START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def save_thread(owner: User | None, name: str, messages: list[BaseMessage]) -> Thread:
    """A thread and its messages, as ``save_django_messages`` saves them: each
    message's id made the row's, then the row's JSON written."""
    thread = Thread.objects.create(
        name=name,
        created_by=owner,
        assistant_id="weather_assistant",
        created_at=START,
        updated_at=START,
    )
    for offset, message in enumerate(messages):
        row = AssistantMessage.objects.create(
            thread=thread, message={}, created_at=START + timedelta(seconds=offset)
        )
        message.id = str(row.id)
        row.message = message_to_dict(message)
        row.save(update_fields=["message"])
    return thread


WEATHER: list[BaseMessage] = [
    HumanMessage("Weather in Paris?"),
    AIMessage(
        "",
        tool_calls=[
            {
                "name": "fetch_weather",
                "args": {"city": "Paris"},
                "id": "call_1",
                "type": "tool_call",
            }
        ],
        response_metadata={"model_name": "gpt-4o-mini"},
        usage_metadata={"input_tokens": 40, "output_tokens": 9, "total_tokens": 49},
    ),
    ToolMessage('{"temperature": 18}', tool_call_id="call_1", artifact={"raw": True}),
    AIMessage("It is 18 degrees in Paris.", response_metadata={"model_name": "gpt-4o-mini"}),
]


@pytest.fixture
def alice() -> User:
    return get_user_model().objects.create_user("alice")


@pytest.mark.usefixtures("tables")
def test_threads_become_conversations_of_their_creators_and_hold_together(alice: User) -> None:
    thread = save_thread(alice, "Paris weather", [m.model_copy() for m in WEATHER])
    save_thread(None, "Orphan", [HumanMessage("Hello?"), AIMessage("Hi.")])

    importer = Importer(default_owner=get_user_model().objects.create_user("archive"))
    imported = import_threads(importer)

    assert (imported.conversations, imported.messages, imported.problems) == (2, 6, [])
    assert [(p.where, p.code) for p in imported.left_out] == [
        (f"thread {thread.pk}", "artifact_not_imported")
    ]
    conversation = Conversation.objects.get(owner=alice)
    assert conversation.title == "Paris weather"
    assert conversation.metadata == {
        "imported_from": {
            "format": "django-ai-assistant",
            "id": str(thread.pk),
            "assistant_id": "weather_assistant",
        }
    }
    assert conversation.created_at == START
    assert load_messages(conversation) == [
        ChatMessage.user("Weather in Paris?"),
        ChatMessage.assistant_tool_calls([ToolCall("call_1", "fetch_weather", {"city": "Paris"})]),
        ChatMessage.tool_result("call_1", '{"temperature": 18}'),
        ChatMessage.assistant("It is 18 degrees in Paris."),
    ]
    call = Message.objects.get(conversation=conversation, position=1)
    assert (call.model, call.input_tokens, call.output_tokens) == ("gpt-4o-mini", 40, 9)
    assert call.created_at == START + timedelta(seconds=1)
    assert Conversation.objects.get(title="Orphan").owner.username == "archive"  # type: ignore[union-attr]
    assert_holds_together(conversation.pk)

    again = import_threads(Importer(skip_existing=True))
    assert (again.conversations, again.skipped) == (0, 2)


@pytest.mark.usefixtures("tables")
def test_a_thread_that_breaks_a_rule_is_refused_and_the_others_are_imported(alice: User) -> None:
    broken = save_thread(
        alice, "broken", [HumanMessage("Hi"), ToolMessage("x", tool_call_id="nowhere")]
    )
    save_thread(alice, "fine", [HumanMessage("Hi"), AIMessage("Hello.")])
    imported = import_threads(Importer())
    assert [(p.where, p.code) for p in imported.problems] == [
        (f"thread {broken.pk}", "unexpected_tool_result")
    ]
    assert list(Conversation.objects.values_list("title", flat=True)) == ["fine"]


@pytest.mark.usefixtures("tables")
def test_threads_are_read_in_batches(alice: User) -> None:
    for index in range(5):
        save_thread(alice, f"t{index}", [HumanMessage("Hi"), AIMessage("Hello.")])
    with CaptureQueriesContext(connection) as queries:
        imported = import_threads(Importer(), batch_size=2)
    assert imported.conversations == 5
    reads = [q["sql"] for q in queries if "django_ai_assistant_" in q["sql"]]
    assert len(reads) == 3 * 2 + 1  # a batch's threads and messages, and the last, empty read


@pytest.mark.usefixtures("tables")
def test_the_command_imports_the_tables(alice: User) -> None:
    save_thread(alice, "Paris weather", [m.model_copy() for m in WEATHER])
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "import_conversations", "--from-django-ai-assistant", "-v", "2", stdout=out, stderr=err
    )
    assert "Imported 1 conversation(s) (4 message(s)" in out.getvalue()
    assert "artifact_not_imported" in err.getvalue()


def test_without_the_tables_the_import_says_so() -> None:
    with pytest.raises(InvalidImport) as info:
        import_threads(Importer())
    assert info.value.code == "unknown_format"
