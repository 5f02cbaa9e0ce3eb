"""Fallback entries and circuit breakers, over real sockets.

Two fake provider servers on 127.0.0.1: the run's entry ``primary`` (OpenAI
Chat Completions) on one, its fallback ``backup`` (Anthropic) on the other,
so each server's request count says which entry was asked. Runs start through
the API, streamed and not.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Message, Run, RunEvent, RunEventType
from llm_conversations.providers.registry import circuit_breaker
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.events import FellBack, TextDelta, log_type
from llm_conversations.runs.log import writer
from tests.api.conftest import parse_sse
from tests.api.test_ag_ui import parse_events
from tests.api.test_ag_ui_lost_attempts import SUPERSEDED as AG_UI_SUPERSEDED
from tests.api.test_ag_ui_lost_attempts import visible_text as ag_ui_visible_text
from tests.api.test_ai_sdk import parse_chunks
from tests.api.test_lost_attempts import visible_text

from .server import API_KEY, OK_TEXT, FakeProvider
from .test_faults import (
    MODES,
    assert_stored_conversation_valid,
    reset,
    start_run,
    status,
    truncated_stream,
)

pytestmark = pytest.mark.django_db

PARTIAL = "A reply whose stream never ends properly."


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fallback_events(run_id: Any) -> list[dict[str, Any]]:
    return list(
        RunEvent.objects.filter(run_id=run_id, type=RunEventType.RUN_FALLBACK)
        .order_by("id")
        .values_list("data", flat=True)
    )


def answer_of(run_id: Any) -> Message:
    return Message.objects.get(run_id=run_id, role="assistant")


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_entry_falls_back_and_the_run_says_who_answered(
    mode: str,
    entries: Any,
    fake: FakeProvider,
    backup: FakeProvider,
    client: APIClient,
    user: User,
) -> None:
    entries()
    fake.play([], every_time=status(503))
    conversation = create_conversation(owner=user)

    result = start_run(client, conversation.pk, "primary", mode, "Hello?")

    assert (result.run["status"], result.run["termination_reason"]) == ("completed", "completed")
    assert len(fake.requests) == 2, "the entry's own retry first"
    assert len(backup.requests) == 1
    assert (result.run["provider"], result.run["answered_by"], result.run["fallbacks"]) == (
        "primary",
        "backup",
        1,
    )
    # The model that answered, not the failed entry's.
    assert result.run["model"] == "backup-model"
    reply = answer_of(result.run["id"])
    assert (reply.content, reply.provider) == (OK_TEXT, "anthropic")
    # The backup answered with its own model, not the run's.
    assert backup.requests[0].body["model"] == "backup-model"
    assert fallback_events(result.run["id"]) == [
        {"from_entry": "primary", "to_entry": "backup", "reason": "unavailable", "status_code": 503}
    ]
    if mode == "stream":
        (event,) = [data for name, data in result.events if name == "run.fallback"]
        assert (event["from_entry"], event["to_entry"]) == ("primary", "backup")
        assert event["run"]["answered_by"] == ""  # nothing answered yet when it was logged
    # The key never reaches the event log.
    assert API_KEY not in str(fallback_events(result.run["id"]))
    assert_stored_conversation_valid(conversation.pk)


def test_a_dropped_connection_falls_back_too(
    entries: Any, fake: FakeProvider, backup: FakeProvider, client: APIClient, user: User
) -> None:
    entries(MAX_RETRIES=0)
    fake.play([], every_time=reset)
    conversation = create_conversation(owner=user)
    result = start_run(client, conversation.pk, "primary", "plain", "Hello?")
    assert result.run["answered_by"] == "backup"
    (event,) = fallback_events(result.run["id"])
    assert event == {"from_entry": "primary", "to_entry": "backup", "reason": "unavailable"}


def test_text_of_a_stream_broken_midway_is_superseded_for_every_reader(
    entries: Any,
    fake: FakeProvider,
    backup: FakeProvider,
    client: APIClient,
    user: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each piece of text is its own event, so the broken reply's text is surely logged.
    monkeypatch.setattr(writer, "TEXT_FLUSH_CHARS", 1)
    entries(MAX_RETRIES=0)
    fake.play([truncated_stream])
    conversation = create_conversation(owner=user)

    live = start_run(client, conversation.pk, "primary", "stream", "Hello?")

    run_id = live.run["id"]
    assert live.run["answered_by"] == "backup"
    assert answer_of(run_id).content == OK_TEXT
    logged = list(RunEvent.objects.filter(run_id=run_id).order_by("id"))
    lost = [e for e in logged if e.type == RunEventType.TEXT_DELTA and e.id < logged[-1].id]
    assert "".join(e.data["delta"] for e in lost).startswith(PARTIAL)
    (fallback,) = [e for e in logged if e.type == RunEventType.RUN_FALLBACK]
    first_lost = min(e.id for e in lost)
    assert fallback.data["superseded_after"] == first_lost - 1
    # The live stream had the lost text, then the event that supersedes it.
    live_text = "".join(data["delta"] for name, data in live.events if name == "text.delta")
    assert live_text == PARTIAL + OK_TEXT

    # Readers after the run see the stored answer only.
    base = f"/api/conversations/{conversation.pk}/runs/{run_id}/events/"
    events = parse_sse(b"".join(client.get(base).streaming_content))
    assert "".join(d["delta"] for name, d in events if name == "text.delta") == OK_TEXT
    assert [name for name, _ in events].count("run.fallback") == 1
    chunks = [chunk for _, chunk in parse_chunks(client.get(base + "?format=ai-sdk"))]
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == OK_TEXT
    assert visible_text(chunks) == OK_TEXT


def test_a_live_ai_sdk_stream_marks_the_broken_text_superseded(
    entries: Any,
    fake: FakeProvider,
    backup: FakeProvider,
    client: APIClient,
    user: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(writer, "TEXT_FLUSH_CHARS", 1)
    entries(MAX_RETRIES=0)
    fake.play([truncated_stream])
    conversation = create_conversation(owner=user)
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/?format=ai-sdk",
        {"message": "Hello?", "stream": True},
        format="json",
    )
    chunks = [chunk for _, chunk in parse_chunks(response)]
    shown = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    assert shown == PARTIAL + OK_TEXT
    assert visible_text(chunks) == OK_TEXT


@pytest.mark.parametrize("code", [400, 401])
def test_a_refused_request_does_not_fall_back(
    code: int,
    entries: Any,
    fake: FakeProvider,
    backup: FakeProvider,
    client: APIClient,
    user: User,
) -> None:
    entries()
    fake.play([], every_time=status(code))
    conversation = create_conversation(owner=user)
    result = start_run(client, conversation.pk, "primary", "plain", "Hello?")
    assert (result.run["status"], result.run["termination_reason"]) == ("failed", "provider_error")
    assert (len(fake.requests), len(backup.requests)) == (1, 0)
    assert fallback_events(result.run["id"]) == []
    assert result.run["answered_by"] == ""


def test_the_last_fallbacks_failure_fails_the_run(
    entries: Any, fake: FakeProvider, backup: FakeProvider, client: APIClient, user: User
) -> None:
    entries(MAX_RETRIES=0)
    fake.play([], every_time=status(503))
    backup.play([], every_time=status(529))
    conversation = create_conversation(owner=user)
    result = start_run(client, conversation.pk, "primary", "plain", "Hello?")
    assert (result.run["status"], result.run["termination_reason"]) == ("failed", "provider_error")
    assert "anthropic" in result.run["error"]["message"]
    assert (len(fake.requests), len(backup.requests)) == (1, 2)  # the backup's own retry
    assert not Message.objects.filter(run_id=result.run["id"], role="assistant").exists()
    assert_stored_conversation_valid(conversation.pk)


def test_the_breaker_skips_a_dead_entry_then_tries_it_once_after_the_reset(
    entries: Any, fake: FakeProvider, backup: FakeProvider, client: APIClient, user: User
) -> None:
    entries(MAX_RETRIES=0, CIRCUIT_BREAKER={"FAILURES": 2, "RESET_AFTER": 30})
    clock = Clock()
    breaker = circuit_breaker("primary")
    assert breaker is not None
    breaker._clock = clock
    fake.play([], every_time=status(503))
    conversation = create_conversation(owner=user)

    def run(text: str) -> dict[str, Any]:
        result = start_run(client, conversation.pk, "primary", "plain", text)
        assert result.run["status"] == "completed"
        return result.run

    # Two failures in a row open the breaker.
    for n in (1, 2):
        assert run(f"Question {n}")["answered_by"] == "backup"
    assert len(fake.requests) == 2
    assert breaker.is_open

    # Open: the primary is skipped without a request.
    third = run("Question 3")
    assert third["answered_by"] == "backup"
    assert len(fake.requests) == 2
    assert fallback_events(third["id"]) == [
        {"from_entry": "primary", "to_entry": "backup", "reason": "circuit_open"}
    ]

    # After RESET_AFTER, one trial; it fails and the breaker opens again at once.
    clock.now += 31
    assert run("Question 4")["answered_by"] == "backup"
    assert len(fake.requests) == 3
    assert run("Question 5")["answered_by"] == "backup"
    assert len(fake.requests) == 3

    # The next trial succeeds: the primary answers and the breaker closes.
    clock.now += 31
    fake.heal()
    sixth = run("Question 6")
    assert (sixth["answered_by"], sixth["fallbacks"]) == ("primary", 0)
    assert len(fake.requests) == 1
    assert not breaker.is_open
    assert answer_of(sixth["id"]).provider == "openai"
    assert_stored_conversation_valid(conversation.pk)


def test_every_entry_skipped_fails_the_run_without_a_request(
    entries: Any, fake: FakeProvider, backup: FakeProvider, client: APIClient, user: User
) -> None:
    breaker = {"FAILURES": 1, "RESET_AFTER": 30}
    entries({"MAX_RETRIES": 0, "CIRCUIT_BREAKER": breaker}, MAX_RETRIES=0, CIRCUIT_BREAKER=breaker)
    fake.play([], every_time=status(503))
    backup.play([], every_time=status(503))
    conversation = create_conversation(owner=user)
    first = start_run(client, conversation.pk, "primary", "plain", "Hello?")
    assert first.run["status"] == "failed"
    asked = (len(fake.requests), len(backup.requests))

    second = start_run(client, conversation.pk, "primary", "plain", "Again?")

    assert (second.run["status"], second.run["termination_reason"]) == (
        "failed",
        "provider_error",
    )
    assert "circuit breaker" in second.run["error"]["message"]
    assert (len(fake.requests), len(backup.requests)) == asked
    assert Run.objects.get(pk=second.run["id"]).iterations == 0


def test_the_loop_yields_the_fallback_after_the_text_it_supersedes(
    entries: Any,
    fake: FakeProvider,
    backup: FakeProvider,
    user: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(writer, "TEXT_FLUSH_CHARS", 1)
    entries(MAX_RETRIES=0)
    fake.play([truncated_stream])
    loop = ToolLoopService()
    run = loop.start(create_conversation(owner=user), "Hello?")
    happened = list(loop.events(run.pk))
    (moved,) = [e for e in happened if isinstance(e, FellBack)]
    assert moved == FellBack("primary", "backup", "unavailable", superseded=True)
    index = happened.index(moved)
    before = "".join(e.text for e in happened[:index] if isinstance(e, TextDelta))
    after = "".join(e.text for e in happened[index:] if isinstance(e, TextDelta))
    assert (before, after) == (PARTIAL, OK_TEXT)
    assert log_type(moved) is RunEventType.RUN_FALLBACK


def test_ag_ui_streams_mark_the_broken_text_superseded(
    entries: Any,
    fake: FakeProvider,
    backup: FakeProvider,
    client: APIClient,
    user: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(writer, "TEXT_FLUSH_CHARS", 1)
    entries(MAX_RETRIES=0)
    fake.play([truncated_stream])
    conversation = create_conversation(owner=user)
    live = client.post(
        f"/api/conversations/{conversation.pk}/runs/?format=ag-ui",
        {"message": "Hello?", "stream": True},
        format="json",
    )
    events = [event for _, event in parse_events(live)]
    ends = [e for e in events if e.get("metadata") == AG_UI_SUPERSEDED]
    assert [e["type"] for e in ends] == ["TEXT_MESSAGE_END"]
    assert ag_ui_visible_text(events) == OK_TEXT
    assert events[-1]["type"] == "RUN_FINISHED"

    run_id = Run.objects.get(conversation=conversation).pk
    later = client.get(f"/api/conversations/{conversation.pk}/runs/{run_id}/events/?format=ag-ui")
    events = [event for _, event in parse_events(later)]
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == OK_TEXT
