"""Hostile bodies and query strings: each is a 4xx in the error format, never a 500."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from rest_framework.test import APIClient

from llm_conversations.core.text import MAX_JSON_DEPTH
from llm_conversations.models import Conversation, Message, Run
from tests.api.conftest import API_SETTINGS, calls_text

pytestmark = pytest.mark.django_db


def messages_url(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/messages/"


def post_raw(client: APIClient, url: str, body: str | bytes) -> Any:
    return client.generic("POST", url, body, content_type="application/json")


def error(response: Any) -> tuple[int, str, str | None]:
    body = response.json()["error"]
    return response.status_code, body["code"], body["field"]


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 2, 1_000, 100_000])
def test_deep_nesting_is_400_too_deep(
    client: APIClient, conversation: Conversation, depth: int
) -> None:
    body = '{"role": "user", "content": "hi", "metadata": ' + "[" * depth + "]" * depth + "}"
    status, code, _ = error(post_raw(client, messages_url(conversation), body))
    assert (status, code) == (400, "too_deep")
    status, code, _ = error(post_raw(client, "/api/conversations/", "[" * depth + "]" * depth))
    assert (status, code) == (400, "too_deep")


def test_nesting_up_to_the_limit_reaches_the_view(client: APIClient) -> None:
    # The body is level 0, metadata level 1, "deep" level 2: the leaf is at MAX_JSON_DEPTH.
    value: Any = "leaf"
    for _ in range(MAX_JSON_DEPTH - 2):
        value = [value]
    response = client.post("/api/conversations/", {"metadata": {"deep": value}}, format="json")
    assert response.status_code == 201
    response = client.post("/api/conversations/", {"metadata": {"deep": [value]}}, format="json")
    assert error(response)[:2] == (400, "too_deep")


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        # A \u0000 escape in tool-argument text: a NUL in the text itself, or
        # escaped again, a NUL in the arguments it decodes to.
        (
            r'{"role": "assistant", "tool_calls": [{"id": "c", "type": "function",'
            r' "function": {"name": "get_time", "arguments": "{\"x\": \"\u0000\"}"}}]}',
            "invalid_text",
            "tool_calls[0].function.arguments",
        ),
        (
            r'{"role": "assistant", "tool_calls": [{"id": "c", "type": "function",'
            r' "function": {"name": "get_time", "arguments": "{\"x\": \"\\u0000\"}"}}]}',
            "invalid_text",
            "tool_calls[0].function.arguments.x",
        ),
        (r'{"role": "user", "content": "a\u0000b"}', "invalid_text", "content"),
        (
            r'[{"role": "user", "content": "ok"}, {"role": "user", "content": "\ud800"}]',
            "invalid_text",
            "messages[1].content",
        ),
        (
            r'{"role": "user", "content": "x", "extra": {"k\u0000": 1}}',
            "invalid_text",
            "extra.k\x00",
        ),
        ('{"role": "user", "content": "x", "n": 1e400}', "invalid_number", "n"),
        ('{"role": "user", "content": "x", "n": [NaN]}', "invalid_number", "n[0]"),
        (
            '{"role": "assistant", "tool_calls": [{"id": "c", "type": "function",'
            ' "function": {"name": "get_time", "arguments": {"x": -1e999}}}]}',
            "invalid_number",
            "tool_calls[0].function.arguments.x",
        ),
    ],
)
def test_unstorable_text_and_numbers_are_400_naming_the_field(
    client: APIClient, conversation: Conversation, body: str, code: str, field: str
) -> None:
    before = Message.objects.count()
    assert error(post_raw(client, messages_url(conversation), body)) == (400, code, field)
    assert Message.objects.count() == before


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/conversations/", '{"title": "t", "metadata": {"x": 1e400}}', "metadata.x"),
        ("runs", '{"message": "hi", "max_iterations": 1e400}', "max_iterations"),
        ("runs", '{"message": {"role": "user", "content": "x", "z": 1e400}}', "message.z"),
    ],
)
def test_infinity_anywhere_is_400(
    client: APIClient, conversation: Conversation, path: str, body: str, field: str
) -> None:
    url = f"/api/conversations/{conversation.pk}/runs/" if path == "runs" else path
    assert error(post_raw(client, url, body)) == (400, "invalid_number", field)


def test_run_message_text_and_tool_output_text_are_checked(
    client: APIClient, conversation: Conversation
) -> None:
    runs = f"/api/conversations/{conversation.pk}/runs/"
    assert error(post_raw(client, runs, r'{"message": "\u0000"}')) == (
        400,
        "invalid_text",
        "message",
    )
    # The model (echo) asks for a call whose argument text decodes to a NUL.
    arguments = json.dumps({"x": "\x00"})
    text = calls_text(("c", "get_time", {}))
    body = json.dumps({"message": text.replace('"{}"', json.dumps(arguments))})
    response = post_raw(client, runs, body)
    assert response.status_code in (201, 400), response.content


@pytest.mark.parametrize(
    "query",
    ["?q=%00", "?ordering=%00", "?search=a%00b", "?page_size=%00"],
)
def test_unstorable_query_values_are_400(client: APIClient, query: str) -> None:
    status, code, field = error(client.get(f"/api/conversations/{query}"))
    assert (status, code) == (400, "invalid_text")
    assert field == query[1:].split("=")[0]


# Body size --------------------------------------------------------------------


def test_a_body_over_max_request_bytes_is_413(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "MAX_REQUEST_BYTES": 2_000}
    big = json.dumps({"role": "user", "content": "x" * 900, "pad": "y" * 2_000})
    response = post_raw(client, messages_url(conversation), big)
    assert error(response) == (413, "too_large", None)
    assert response.json()["error"]["details"] == {"limit": 2_000}
    small = json.dumps({"role": "user", "content": "x" * 900})
    assert post_raw(client, messages_url(conversation), small).status_code == 201


@pytest.fixture
def wsgi_requests() -> Any:
    # The WSGI handler would close the test's connection at the end of each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield get_wsgi_application()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def wsgi_post(
    application: Any, path: str, body: bytes, **environ: Any
) -> tuple[int, dict[str, Any]]:
    """POST ``body`` with no CONTENT_LENGTH at all, as a server passes a chunked body."""
    user = User.objects.get(username="alice")
    env = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "CONTENT_TYPE": "application/json",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "HTTP_AUTHORIZATION": "Basic YWxpY2U6YWxpY2UtcHc=",  # alice:alice-pw
        **environ,
    }
    assert user.check_password("alice-pw")
    started: list[str] = []
    chunks = application(env, lambda status, headers: started.append(status))
    content = b"".join(chunks)
    return int(started[0].split()[0]), json.loads(content)


def test_a_chunked_body_over_the_limit_is_413_not_empty(
    wsgi_requests: Any, conversation: Conversation
) -> None:
    body = json.dumps({"role": "user", "content": "x" * (10 * 1024 * 1024)}).encode()
    status, data = wsgi_post(
        wsgi_requests, messages_url(conversation), body, **{"wsgi.input_terminated": True}
    )
    assert (status, data["error"]["code"]) == (413, "too_large")


def test_a_chunked_body_within_the_limit_is_read(
    wsgi_requests: Any, conversation: Conversation
) -> None:
    body = json.dumps({"role": "user", "content": "chunked"}).encode()
    status, data = wsgi_post(
        wsgi_requests, messages_url(conversation), body, **{"wsgi.input_terminated": True}
    )
    assert status == 201
    assert data["data"][0]["content"] == "chunked"


def test_a_chunked_body_the_server_cannot_end_is_411(
    wsgi_requests: Any, conversation: Conversation
) -> None:
    body = json.dumps({"role": "user", "content": "chunked"}).encode()
    status, data = wsgi_post(wsgi_requests, messages_url(conversation), body)
    assert (status, data["error"]["code"]) == (411, "length_required")


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        # Python reads no integer of more than 4,300 digits.
        ('{"message": "hi", "max_iterations": 1' + "1" * 4400 + "}", "invalid_number", None),
        # A key no JSON encoder writes back: the error names it with U+FFFD instead.
        ('{"message": "hi", "\\ud800": 1}', "invalid_text", "\ufffd"),
        (
            '{"message": {"role": "user", "content": "x", "\\ud800": 2}}',
            "invalid_text",
            "message.\ufffd",
        ),
    ],
)
def test_bodies_python_cannot_read_or_write_back_are_400_in_the_error_format(
    client: APIClient, conversation: Conversation, body: str, code: str, field: str | None
) -> None:
    response = client.generic(
        "POST",
        f"/api/conversations/{conversation.pk}/runs/",
        body.encode(),
        content_type="application/json",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field)
    assert not Run.objects.exists()


def test_a_multipart_body_of_too_many_fields_is_400_in_the_error_format(
    client: APIClient, settings: Any
) -> None:
    fields = {f"f{i}": "x" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)}
    response = client.post("/api/attachments/", fields, format="multipart")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "too_many_fields"


# Server errors --------------------------------------------------------------------


def test_an_unexpected_exception_in_a_view_is_a_logged_json_500(
    client: APIClient,
    conversation: Conversation,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A bug, never an expected fault: still the error format, not Django's HTML page.
    from llm_conversations.api.views import conversations

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(conversations.ConversationViewSet, "retrieve", broken)
    with caplog.at_level("ERROR", logger="llm_conversations.api"):
        response = client.get(f"/api/conversations/{conversation.pk}/")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"] == {
        "code": "server_error",
        "message": "The server could not complete the request.",
        "field": None,
        "details": None,
    }
    assert "a bug" not in response.content.decode()
    (record,) = [r for r in caplog.records if r.name == "llm_conversations.api"]
    assert record.exc_info is not None
    assert record.exc_info[0] is RuntimeError
