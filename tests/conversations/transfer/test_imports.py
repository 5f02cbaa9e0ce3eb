"""Imports: bad records reported and skipped (or stopped at with strict), unfinished runs
imported as ended, attachments inline, and other tools' files (fixtures/imports/)."""

from __future__ import annotations

import base64
import io
import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from llm_conversations.conversations import append_messages, create_conversation, load_messages
from llm_conversations.conversations.attachments import create_attachment
from llm_conversations.conversations.transfer.export import (
    Attachments,
    full_records,
    select_conversations,
    write_lines,
)
from llm_conversations.conversations.transfer.importing import Importer, ImportProblem
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.reasoning import Reasoning, ReasoningKind
from llm_conversations.core.sequence import check_sequence
from llm_conversations.exceptions import InvalidImport, InvalidMessage
from llm_conversations.models import (
    Attachment,
    Conversation,
    Message,
    Run,
    RunStatus,
    TerminationReason,
)
from tests.runs.test_loop import calls_text, echo_service
from tests.support.attachment_files import image_bytes

pytestmark = pytest.mark.django_db

User = get_user_model()
FIXTURES = Path(__file__).parent / "fixtures" / "imports"


@pytest.fixture
def alice() -> Any:
    return User.objects.create_user("alice")


@pytest.fixture
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def stored_files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def call(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def exported(**options: Any) -> str:
    stream = io.StringIO()
    write_lines(full_records(select_conversations(), **options), stream)
    return stream.getvalue()


def assert_whole(conversation: Conversation) -> None:
    """The conversation keeps the sequence rules, every call answered, and takes a next turn."""
    history = load_messages(conversation)
    assert check_sequence(history) == ()
    append_messages(conversation, [ChatMessage.user("one more question")])


# Unfinished runs ------------------------------------------------------------------


def test_a_run_paused_for_approval_is_imported_as_ended_with_its_calls_answered(
    alice: Any,
) -> None:
    conversation = create_conversation(owner=alice, title="paused")
    text = calls_text(("t", "get_time", {}), ("d", "delete_file", {"path": "/tmp/x"}))
    run = echo_service().send(conversation, ChatMessage.user(text))
    assert run.status == RunStatus.REQUIRES_ACTION
    lines = exported()
    Conversation.objects.all().delete()

    imported = Importer().import_lines(io.StringIO(lines))
    assert (imported.conversations, imported.runs, imported.problems) == (1, 1, [])
    run = Run.objects.get()
    assert (run.status, run.termination_reason) == ("cancelled", "imported_unfinished")
    assert run.waiting_calls == []
    assert run.finished_at is not None
    results = Message.objects.filter(role=Role.TOOL).order_by("position")
    assert [(r.tool_call_id, r.is_error, r.run_id) for r in results] == [
        ("t", True, run.pk),
        ("d", True, run.pk),
    ]
    assert "unfinished when it was exported" in results[0].content
    imported_conversation = Conversation.objects.get()
    assert imported_conversation.message_count == 4
    # The conversation takes a new run, as after a cancel.
    assert echo_service().send(imported_conversation, "again").status == "completed"


def test_a_queued_run_is_imported_as_ended_without_results(alice: Any) -> None:
    conversation = create_conversation(owner=alice, messages=[ChatMessage.user("hi")])
    Run.objects.create(conversation=conversation, status=RunStatus.QUEUED)
    lines = exported()
    Conversation.objects.all().delete()
    Importer().import_lines(io.StringIO(lines))
    assert Run.objects.get().termination_reason == TerminationReason.IMPORTED_UNFINISHED
    assert [m.role for m in load_messages(Conversation.objects.get())] == [Role.USER]


# Attachments inline ----------------------------------------------------------------


def with_image(owner: Any) -> tuple[Conversation, Attachment]:
    image = create_attachment(owner, image_bytes("PNG", (16, 16)), filename="red.png")[0]
    conversation = create_conversation(owner=owner)
    append_messages(
        conversation,
        [
            ChatMessage.user(
                [
                    {"type": "text", "text": "Colour?"},
                    {"type": "image", "attachment_id": str(image.pk)},
                ]
            ),
            ChatMessage.assistant("red"),
        ],
    )
    return conversation, image


def test_inline_attachments_import_into_an_empty_database_whole(
    alice: Any, media_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    _, image = with_image(alice)
    data = image.file.read()
    by_reference = json.loads(exported())
    assert by_reference["messages"][0]["attachments"][0]["data"] is None
    first = exported(attachments=Attachments.INLINE)
    listed = json.loads(first)["messages"][0]["attachments"][0]
    assert base64.b64decode(listed["data"]) == data
    with django_capture_on_commit_callbacks(execute=True):
        Conversation.objects.all().delete()
        Attachment.objects.all().delete()
    assert stored_files(media_root) == []

    imported = Importer().import_lines(io.StringIO(first))
    assert (imported.conversations, imported.attachments, imported.problems) == (1, 1, [])
    restored = Attachment.objects.get()
    assert (restored.pk, restored.owner, restored.sha256) == (image.pk, alice, image.sha256)
    assert (restored.width, restored.height, restored.filename) == (16, 16, "red.png")
    assert restored.file.read() == data
    assert exported(attachments=Attachments.INLINE) == first
    # The same file again for the same owner (a second import elsewhere) reuses it.
    Conversation.objects.all().delete()
    assert Importer().import_lines(io.StringIO(first)).attachments == 0
    assert Attachment.objects.count() == 1


def test_inline_data_is_checked_and_a_refused_conversation_leaves_no_file(
    alice: Any, media_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    with_image(alice)
    record = json.loads(exported(attachments=Attachments.INLINE))
    with django_capture_on_commit_callbacks(execute=True):
        Conversation.objects.all().delete()
        Attachment.objects.all().delete()
    tampered = json.loads(json.dumps(record))
    tampered["messages"][0]["attachments"][0]["data"] = base64.b64encode(b"other").decode()
    with pytest.raises(InvalidImport) as caught:
        Importer().import_record(tampered)
    assert caught.value.field == "messages[0].attachments[0].data"
    # Refused after its file was stored: the sequence breaks at the last message.
    broken = json.loads(json.dumps(record))
    broken["messages"][1]["role"] = "tool"
    broken["messages"][1]["tool_call_id"] = "nowhere"
    broken["messages"][1]["model"] = broken["messages"][1]["provider"] = ""
    with pytest.raises(InvalidMessage, match="answers no unanswered call"):
        Importer(strict=True).import_lines([json.dumps(broken)])
    assert not Attachment.objects.exists()
    assert stored_files(media_root) == []


# Bad records ----------------------------------------------------------------------


def test_bad_lines_are_reported_and_the_good_ones_imported(alice: Any) -> None:
    path = FIXTURES / "openai_with_bad_lines.jsonl"
    with path.open() as lines:
        imported = Importer(default_owner=alice).import_file(lines, "openai")
    assert imported.conversations == 2
    assert [(p.where, p.code, p.field) for p in imported.problems] == [
        ("line 2", "invalid_import", None),
        ("line 3", "unexpected_tool_result", "messages[1].tool_call_id"),
        ("line 4", "missing_content", "messages[0].content"),
        ("line 5", "invalid_import", "messages[0].role"),
    ]
    assert str(imported.problems[2]).startswith("line 4: missing_content at messages[0].content: ")
    assert Conversation.objects.count() == 2  # nothing of a refused one is stored
    assert Message.objects.count() == 4


def test_strict_stops_at_the_first_bad_line_keeping_those_before(alice: Any) -> None:
    importer = Importer(default_owner=alice, strict=True)
    with (FIXTURES / "openai_with_bad_lines.jsonl").open() as lines, pytest.raises(InvalidImport):
        importer.import_file(lines, "openai")
    assert (importer.where, importer.imported.conversations) == ("line 2", 1)
    assert Conversation.objects.count() == 1


def test_the_command_reports_each_bad_line_and_fails_only_when_nothing_was_imported(
    alice: Any, tmp_path: Path
) -> None:
    path = str(FIXTURES / "openai_with_bad_lines.jsonl")
    with pytest.raises(CommandError, match="--default-owner is needed"):
        call("import_conversations", path, "--format", "openai")
    with pytest.raises(CommandError, match=r"line 2: invalid_import: not a JSON line.*\(1 conv"):
        call(
            "import_conversations",
            path,
            "--format",
            "openai",
            "--default-owner",
            "alice",
            "--strict",
        )
    # Going on: line 1 (imported before the stop) is refused as imported, line 6 imported.
    out, err = call("import_conversations", path, "--format", "openai", "--default-owner", "alice")
    assert out.strip() == (
        "Imported 1 conversation(s) (2 message(s), 0 run(s), 0 attachment(s)); "
        "skipped 0 existing; refused 5."
    )
    assert [line.split(":")[:2] for line in err.splitlines()] == [
        ["line 1", " conversation_exists"],
        ["line 2", " invalid_import"],
        ["line 3", " unexpected_tool_result at messages[1].tool_call_id"],
        ["line 4", " missing_content at messages[0].content"],
        ["line 5", " invalid_import at messages[0].role"],
    ]
    # Imported before: each is recognised, refused, and with --skip-existing skipped.
    with pytest.raises(CommandError, match=r"Imported 0 conversation.*refused 6\."):
        call("import_conversations", path, "--format", "openai", "--default-owner", "alice")
    with pytest.raises(CommandError, match=r"skipped 2 existing; refused 4\."):
        call(
            "import_conversations",
            path,
            "--format",
            "auto",
            "--default-owner",
            "alice",
            "--skip-existing",
        )
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(CommandError, match="refused 1"):
        call("import_conversations", str(empty), "--format", "auto", "--default-owner", "alice")


# Other tools' files ------------------------------------------------------------------


def import_fixture(name: str, fmt: str, owner: Any) -> list[Conversation]:
    with (FIXTURES / name).open() as lines:
        imported = Importer(default_owner=owner, strict=True).import_file(lines, fmt)
    conversations = list(Conversation.objects.order_by("created_at", "title"))
    assert imported.conversations == len(conversations)
    for conversation in conversations:
        assert conversation.owner == owner
        assert conversation.metadata["imported_from"]["format"] == fmt
        assert_whole(conversation)
    return conversations


def test_openai_message_arrays(alice: Any, media_root: Path) -> None:
    assert len(import_fixture("openai_messages.json", "openai", alice)) == 2
    history = load_messages(Conversation.objects.get(title="Weather in Paris"))
    assert [m.role.value for m in history[:6]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert [c.arguments for c in history[2].tool_calls or ()] == [
        {"city": "Paris"},
        {"timezone": "Europe/Paris"},
    ]
    assert (history[4].tool_call_id, history[4].content) == ("call_t1", "14:05")
    described = load_messages(Conversation.objects.get(title=""))
    parts = described[1].parts or ()
    assert [part.type for part in parts] == ["text", "image", "text"]
    assert parts[2].text == "[image https://example.com/square.png not imported]"  # type: ignore[union-attr]
    assert Attachment.objects.get().owner == alice
    assert described[2].content == "I can only see the first one: it is red."


def test_ai_sdk_ui_messages(alice: Any, media_root: Path) -> None:
    with (FIXTURES / "ai_sdk_messages.json").open() as lines:
        imported = Importer(default_owner=alice).import_file(lines, "auto")
    assert [(note.code, note.field) for note in imported.left_out] == [
        ("part_not_imported", "messages[2].parts[8]"),
        ("missing_tool_result", None),
    ]
    [conversation] = Conversation.objects.all()
    assert (conversation.title, conversation.metadata["imported_from"]["id"]) == (
        "Trip planning",
        "chat-42",
    )
    assert_whole(conversation)
    history = load_messages(conversation)
    assert [m.role.value for m in history[:10]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    turn = history[2]
    assert [c.id for c in turn.tool_calls or ()] == ["tc1", "tc2", "tc3"]
    assert [(r.provider, r.text) for r in turn.reasoning or ()] == [
        ("ai-sdk", "I need the weather first.")
    ]
    assert [(m.content, m.is_error) for m in history[3:6]] == [
        ('{"temperature":21}', False),
        ("The search server is down.", True),
        ("The tool call was denied.", True),
    ]
    assert history[9].is_error  # tc4 waited for an output the file does not have
    assert [p.type for p in history[1].parts or ()] == ["text", "image"]


def test_chatgpt_export(alice: Any) -> None:
    branch, tools = import_fixture("chatgpt_conversations.json", "chatgpt", alice)
    history = load_messages(branch)
    # The branch up to current_node; the hidden system message and the edit are left out.
    assert [m.content[:14] for m in history[:4]] == [
        "Hello! Can you",
        "Of course! Wha",
        "How do I write",
        "Like this:\n\n``",
    ]
    assert Message.objects.filter(conversation=branch, position=1).get().model == "gpt-4"
    assert branch.created_at.isoformat() == "2024-01-01T00:00:00+00:00"
    history = load_messages(tools)
    assert [m.role.value for m in history[:9]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert history[0].content.startswith("[image_asset_pointer file-service://file-Abc123 not")
    call = (history[1].tool_calls or ())[0]
    assert (call.id, call.name, call.arguments) == ("code", "python", {"code": "print(12 + 30)"})
    assert [r.provider for r in history[1].reasoning or ()] == ["chatgpt"]
    assert (history[2].tool_call_id, history[2].content) == ("code", "42")
    assert (history[5].tool_calls or ())[0].name == "browser"
    assert [c.name for c in history[7].tool_calls or ()] == ["dalle.text2im"]
    assert "model_set_context" not in json.dumps([m.to_stored() for m in history])


def test_claude_export(alice: Any) -> None:
    notes, lisbon = import_fixture("claude_conversations.json", "claude", alice)
    history = load_messages(notes)
    assert history[0].content == (
        "Summarise these notes in one line.\n\nnotes.txt:\n"
        "Buy milk. Call Ana. Finish the report by Friday.\n\n"
        "[file not imported: whiteboard.jpg]"
    )
    assert [m.role.value for m in history[:4]] == ["user", "assistant", "user", "assistant"]
    history = load_messages(lisbon)
    assert [m.role.value for m in history[:5]] == ["user", "assistant", "tool", "assistant", "tool"]
    assert [(r.provider, r.kind.value) for r in history[1].reasoning or ()] == [
        ("claude-export", "thinking")
    ]
    assert [(c.id, c.arguments) for c in history[1].tool_calls or ()] == [
        ("toolu_01A", {"query": "Lisbon population"})
    ]
    assert history[2].content.startswith("Lisbon: about 545,000")
    assert history[4].is_error  # the artifacts call has no result in the export


def test_langchain_message_dicts(alice: Any) -> None:
    with (FIXTURES / "langchain_messages.json").open() as lines:
        imported = Importer(default_owner=alice).import_file(lines, "langchain")
    assert (imported.conversations, imported.problems) == (2, [])
    assert [note.code for note in imported.left_out] == [
        "content_not_imported",
        "artifact_not_imported",
    ]
    weather = load_messages(Conversation.objects.get(title="Lisbon and Porto"))
    assert [m.role.value for m in weather] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert weather[2].content == "Let me check both."
    assert [(c.id, c.arguments) for c in weather[2].tool_calls or ()] == [
        ("toolu_01", {"city": "Lisbon"}),
        ("toolu_02", {"city": "Porto"}),
    ]
    assert weather[2].reasoning == (
        Reasoning("langchain", ReasoningKind.THINKING, "Two cities: two calls.", "EqQBCkYIBxgCKkA"),
    )
    assert weather[4].is_error
    call_row = Message.objects.get(conversation__title="Lisbon and Porto", position=2)
    assert (call_row.model, call_row.input_tokens, call_row.cached_tokens) == (
        "claude-sonnet-4-5",
        412,
        256,
    )
    colours = load_messages(Conversation.objects.get(title=""))
    assert colours[1].reasoning == (
        Reasoning("langchain", ReasoningKind.THINKING, "Any colour will do."),
    )
    (bad,) = colours[3].tool_calls or ()
    assert (bad.malformed, bad.raw_arguments) == (True, "{not json")
    for conversation in Conversation.objects.all():
        assert_whole(conversation)


def test_auto_tells_each_format_and_ours(alice: Any) -> None:
    for name, fmt in [
        ("openai_messages.json", "openai"),
        ("langchain_messages.json", "langchain"),
        ("ai_sdk_messages.json", "ai-sdk"),
        ("chatgpt_conversations.json", "chatgpt"),
        ("claude_conversations.json", "claude"),
    ]:
        with (FIXTURES / name).open() as lines:
            assert Importer(default_owner=alice, strict=True).import_file(lines, "auto")
        formats = set(
            Conversation.objects.values_list("metadata__imported_from__format", flat=True)
        )
        assert fmt in formats
    lines = exported()
    Conversation.objects.all().delete()
    imported = Importer().import_file(io.StringIO("\n" + lines), "auto")
    assert (imported.conversations, imported.problems) == (9, [])


def test_a_foreign_conversation_costs_the_same_queries_at_any_length(alice: Any) -> None:
    def queries(turns: int) -> int:
        messages = [
            {"role": role, "content": f"{role} {n}"}
            for n in range(turns)
            for role in ("user", "assistant")
        ]
        with CaptureQueriesContext(connection) as captured:
            imported = Importer(default_owner=alice).import_file(
                [json.dumps({"id": f"c{turns}", "messages": messages})], "openai"
            )
        assert imported.problems == []
        return len(captured)

    # 12 turns: 24 rows stay inside one INSERT on SQLite, whose statements take
    # at most 999 variables (bulk_create splits longer batches there).
    assert queries(1) == queries(12)


def test_problems_read_as_the_command_prints_them() -> None:
    assert str(ImportProblem("item 3", "invalid_import", "bad.", "messages[0]")) == (
        "item 3: invalid_import at messages[0]: bad."
    )
