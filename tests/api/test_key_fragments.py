"""A provider that echoes its API key altered leaks no fragment of it anywhere.

An OpenAI-compatible server on 127.0.0.1 refuses the key, quoting it changed
(another case, split by markup, masked): no piece of five characters of the
key reaches the API's answer, the run, its event log, the database, the logs,
the webhook sent, the admin or an export.
"""

from __future__ import annotations

import io
import json
import logging
import random
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from llm_conversations.conversations.transfer.export import dumps, full_records
from llm_conversations.models import Conversation, Run
from tests.providers.test_redaction import leaked, random_key
from tests.support.http_server import serving
from tests.support.webhook_receiver import Receiver, hooks, receiver

__all__ = ["hooks", "receiver"]  # fixtures

pytestmark = pytest.mark.django_db

KEY = random_key(random.Random(11))
ECHO = (
    f"Incorrect API key provided: {KEY[:7]}…{KEY[-4:]}. Keys seen: {KEY.upper()[20:38]}, "
    f"{KEY[40:70]}<b>{KEY[70:100]}</b> ({KEY[120:].swapcase()})."
)


@pytest.fixture
def echoing_provider(settings: Any, hooks: Receiver) -> Iterator[None]:
    """A provider entry whose server answers 401, quoting the key altered."""

    def respond(handler: BaseHTTPRequestHandler) -> None:
        body = json.dumps({"error": {"message": ECHO, "type": "invalid_request_error"}})
        handler.send_response(401)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body.encode())

    with serving(respond) as server:
        entry = {"BACKEND": "openai", "MODEL": "m", "API_KEY": KEY, "BASE_URL": server.root}
        providers = {**settings.LLM_CONVERSATIONS["PROVIDERS"], "echoing": entry}
        settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "PROVIDERS": providers}
        yield


def test_no_fragment_of_the_key_reaches_any_surface(
    echoing_provider: None,
    hooks: Receiver,
    client: APIClient,
    conversation: Conversation,
    caplog: pytest.LogCaptureFixture,
    django_capture_on_commit_callbacks: Any,
) -> None:
    caplog.set_level(logging.DEBUG)
    runs = f"/api/conversations/{conversation.pk}/runs/"
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(runs, {"message": "hi", "provider": "echoing"}, format="json")
    assert response.status_code == 502
    error = response.json()["error"]["details"]["run"]["error"]
    assert error["type"] == "AuthenticationError"
    assert "[redacted]" in error["message"]
    run = Run.objects.get()
    events = client.get(f"{runs}{run.pk}/events/", HTTP_ACCEPT="text/event-stream")
    staff = User.objects.create_superuser("root", password="root-pw")
    admin = Client()
    admin.force_login(staff)
    change = admin.get(reverse("admin:llm_conversations_run_change", args=[run.pk]))
    assert change.status_code == 200
    database = io.StringIO()
    call_command("dumpdata", "llm_conversations", stdout=database)
    surfaces = {
        "the API's answer": response.content.decode(),
        "the run": client.get(f"{runs}{run.pk}/").content.decode(),
        "the event log": b"".join(events.streaming_content).decode(),
        "the database": database.getvalue(),
        "the logs": caplog.text,
        "the webhook": b"".join(body for _, body in hooks.requests).decode(),
        "the admin": change.content.decode(),
        "the export": "".join(dumps(r) for r in full_records(Conversation.objects.all())),
    }
    assert "run.failed" in surfaces["the webhook"]
    for surface, text in surfaces.items():
        assert leaked(KEY, text) == [], surface
