"""The router's URLs and names, the views kept out of ATOMIC_REQUESTS, error statuses."""

from __future__ import annotations

import uuid

import pytest
from django.urls import resolve, reverse

from llm_conversations.api.errors import as_api_error, sent_field
from llm_conversations.api.schema import ServerSentEventSerializer, describe_run_events
from llm_conversations.exceptions import (
    ConversationBusy,
    FeedbackError,
    InvalidMessage,
    ProviderUnavailableError,
    RunStateError,
    ToolError,
)
from llm_conversations.models import RunEventType
from llm_conversations.providers import ProviderNotConfigured

C = uuid.UUID("6f1c1f8e-1d0a-4c53-9a57-0f8a3c1de0b7")
R = uuid.UUID("c3f7d0a4-5b5e-4f0a-8d8e-2b0f3c9f0d11")


@pytest.mark.parametrize(
    ("name", "kwargs", "path"),
    [
        ("conversation-list", {}, "/api/conversations/"),
        ("conversation-detail", {"pk": C}, f"/api/conversations/{C}/"),
        ("message-list", {"conversation_pk": C}, f"/api/conversations/{C}/messages/"),
        (
            "message-feedback",
            {"conversation_pk": C, "pk": R},
            f"/api/conversations/{C}/messages/{R}/feedback/",
        ),
        ("run-list", {"conversation_pk": C}, f"/api/conversations/{C}/runs/"),
        ("run-detail", {"conversation_pk": C, "run_pk": R}, f"/api/conversations/{C}/runs/{R}/"),
        *(
            (
                f"run-{action.replace('_', '-')}",
                {"conversation_pk": C, "run_pk": R},
                f"/api/conversations/{C}/runs/{R}/{action}/",
            )
            for action in ("approve", "deny", "submit_tool_outputs", "cancel")
        ),
        ("tool-list", {}, "/api/tools/"),
    ],
)
def test_url_names_and_paths(name: str, kwargs: dict[str, uuid.UUID], path: str) -> None:
    assert reverse(f"llm_conversations:{name}", kwargs=kwargs) == path
    assert resolve(path).url_name == name


@pytest.mark.parametrize(
    ("path", "atomic"),
    [
        (f"/api/conversations/{C}/runs/", False),
        (f"/api/conversations/{C}/runs/{R}/", False),
        (f"/api/conversations/{C}/runs/{R}/approve/", False),
        (f"/api/conversations/{C}/runs/{R}/cancel/", False),
        (f"/api/conversations/{C}/messages/", True),
        (f"/api/conversations/{C}/messages/{R}/feedback/", True),
    ],
)
def test_run_views_are_outside_atomic_requests(path: str, atomic: bool) -> None:
    non_atomic = getattr(resolve(path).func, "_non_atomic_requests", set())
    assert ("default" not in non_atomic) is atomic


def test_event_names_come_from_one_enum() -> None:
    field = ServerSentEventSerializer().fields["event"]
    assert list(field.choices) == [name.value for name in RunEventType]
    assert describe_run_events().endswith(
        "then one of `run.requires_action`, `run.completed`, `run.failed`, `run.cancelled`"
    )


@pytest.mark.parametrize(
    ("exc", "status", "code", "field"),
    [
        (ConversationBusy(), 409, "conversation_busy", None),
        (RunStateError("run_not_waiting", "x"), 409, "run_not_waiting", None),
        (RunStateError("run_not_active", "x"), 409, "run_not_active", None),
        (RunStateError("unknown_tool_call", "x"), 400, "unknown_tool_call", None),
        (
            RunStateError("invalid_max_iterations", "x", field="max_iterations"),
            400,
            "invalid_max_iterations",
            "max_iterations",
        ),
        (
            InvalidMessage("missing_content", "x", field="content"),
            400,
            "missing_content",
            "content",
        ),
        (ToolError("unknown_tool", "x", field="tools"), 400, "unknown_tool", "tools"),
        (FeedbackError("not_an_assistant_message", "x"), 400, "not_an_assistant_message", None),
        (FeedbackError("invalid_rating", "x", field="rating"), 400, "invalid_rating", "rating"),
        (ProviderNotConfigured("x"), 400, "unknown_provider", "provider"),
        (ProviderUnavailableError("x"), 502, "provider_error", None),
    ],
)
def test_library_errors_get_a_status_by_code(
    exc: Exception, status: int, code: str, field: str | None
) -> None:
    error = as_api_error(exc)
    assert error is not None
    assert (error.status_code, error.code, error.field) == (status, code, field)


@pytest.mark.parametrize(
    ("field", "names", "sent"),
    [
        # A message posted on its own: the body is the message.
        ("messages[0].content", {"messages[0]": ""}, "content"),
        ("messages[0].tool_calls[1].id", {"messages[0]": ""}, "tool_calls[1].id"),
        ("messages[0]", {"messages[0]": ""}, None),
        ("messages[1].content", {"messages[0]": ""}, "messages[1].content"),
        ("messages[10].content", {"messages[1]": ""}, "messages[10].content"),
        # A run's user turn sent as its text, or taken from a chat's UI messages.
        ("message.content", {"message.content": "message"}, "message"),
        ("message.contents", {"message.content": "message"}, "message.contents"),
        ("message.content", {"message.content": "messages"}, "messages"),
        ("message.role", {"message.content": "message"}, "message.role"),
        (None, {"messages[0]": ""}, None),
        ("content", {}, "content"),
    ],
)
def test_error_fields_are_named_as_the_request_sent_them(
    field: str | None, names: dict[str, str], sent: str | None
) -> None:
    assert sent_field(field, names) == sent
