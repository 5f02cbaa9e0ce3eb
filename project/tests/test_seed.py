"""The demo seed command is idempotent and covers the documented cases."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.conversations.attachments import create_attachment
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Attachment, Conversation, Message, Run
from llm_conversations.providers import EchoProvider
from llm_conversations.runs import ToolLoopService
from project.management.commands.seed_demo import demo_registry
from tests.support.attachment_files import image_bytes

pytestmark = pytest.mark.django_db


def test_seed_twice_creates_everything_once() -> None:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    first = (Conversation.objects.count(), Message.objects.count(), Run.objects.count())
    call_command("seed_demo", stdout=out)
    assert (Conversation.objects.count(), Message.objects.count(), Run.objects.count()) == first
    assert "6 conversation(s) added, 0 already there" in out.getvalue()
    assert "0 conversation(s) added, 6 already there" in out.getvalue()
    assert "user: demo  password: demo" in out.getvalue()
    user = get_user_model().objects.get(username="demo")
    assert user.is_staff
    assert user.check_password("demo")
    assert set(
        Conversation.objects.filter(owner=user).values_list("metadata__demo", flat=True)
    ) == {
        "plain",
        "parallel-tools",
        "tool-error",
        "echo-run",
        "approval",
        "failed-run",
    }
    calls = Message.objects.get(
        tool_calls__isnull=False, conversation__metadata__demo="parallel-tools"
    )
    assert [call["function"]["arguments"] for call in calls.tool_calls] == [
        {"city": "Paris", "unit": "celsius"},
        {},
    ]


def test_seed_covers_tool_error_failed_and_paused_runs() -> None:
    call_command("seed_demo", stdout=StringIO())
    runs = {
        run.conversation.metadata["demo"]: run for run in Run.objects.select_related("conversation")
    }
    assert set(runs) == {"echo-run", "approval", "failed-run"}
    assert (runs["echo-run"].status, runs["echo-run"].iterations) == ("completed", 2)
    assert runs["failed-run"].status == "failed"
    paused = runs["approval"]
    assert paused.status == "requires_action"
    assert [(p.call.name, p.reason) for p in paused.waiting_calls] == [
        ("send_email", "requires_approval")
    ]
    # The demo tools answered for real: one result from get_weather, one converted amount.
    results = Message.objects.filter(role="tool", conversation__metadata__demo="echo-run")
    assert [r.is_error for r in results] == [False, False]
    assert "EUR" in results[1].content
    assert Message.objects.filter(role="tool", is_error=True).count() == 1  # the tool-error demo


def test_paused_demo_run_can_be_approved_with_the_demo_tools() -> None:
    call_command("seed_demo", stdout=StringIO())
    paused = Run.objects.get(status="requires_action")
    run = ToolLoopService(EchoProvider(), tools=demo_registry()).approve(paused.pk)
    assert run.status == "completed"
    assert Message.objects.filter(
        run=run, role="tool", content__contains="nothing was sent"
    ).exists()


def test_an_export_of_the_demo_imports_into_an_empty_database_whole(
    settings: Any, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    """The paused run is imported as ended, the attachment with its bytes (inline)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    call_command("seed_demo", stdout=StringIO())
    demo = get_user_model().objects.get(username="demo")
    image = create_attachment(demo, image_bytes("PNG", (16, 16)), filename="red.png")[0]
    create_conversation(
        owner=demo,
        title="An image",
        messages=[
            ChatMessage.user([{"type": "image", "attachment_id": str(image.pk)}]),
            ChatMessage.assistant("A red square."),
        ],
    )
    path = tmp_path / "demo.jsonl"
    call_command(
        "export_conversations", "--attachments", "inline", "-o", str(path), stderr=StringIO()
    )
    before = counts()
    with django_capture_on_commit_callbacks(execute=True):
        Conversation.objects.all().delete()
        Attachment.objects.all().delete()
        get_user_model().objects.all().delete()
    assert counts() == (0, 0, 0, 0)
    assert not any(p.is_file() for p in (tmp_path / "media").rglob("*"))
    get_user_model().objects.create_user("demo")

    out = StringIO()
    call_command("import_conversations", str(path), stdout=out, stderr=StringIO())
    # One message more: the error result answering the call that waited for approval.
    conversations, messages, runs, attachments = before
    assert counts() == (conversations, messages + 1, runs, attachments)
    assert out.getvalue().strip() == (
        f"Imported {conversations} conversation(s) ({messages + 1} message(s), {runs} run(s), "
        f"{attachments} attachment(s)); skipped 0 existing; refused 0."
    )
    paused = Run.objects.get(conversation__metadata__demo="approval")
    assert (paused.status, paused.termination_reason) == ("cancelled", "imported_unfinished")
    assert Attachment.objects.get().file.read() == image_bytes("PNG", (16, 16))
    for conversation in Conversation.objects.all():
        assert check_sequence(load_messages(conversation)) == ()
    # The paused conversation takes a new run, as after a cancel.
    conversation = paused.conversation
    run = ToolLoopService(EchoProvider(), tools=demo_registry()).send(conversation, "hi")
    assert run.status == "completed"


def counts() -> tuple[int, int, int, int]:
    return (
        Conversation.objects.count(),
        Message.objects.count(),
        Run.objects.count(),
        Attachment.objects.count(),
    )
