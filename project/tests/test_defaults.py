"""What a newcomer copies from the demo: no password hash per API request, no worker reload."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from llm_conversations.management.commands.llm_worker import Command as LlmWorker

pytestmark = pytest.mark.django_db


def test_the_demo_api_takes_the_session_not_a_password_on_every_request() -> None:
    assert settings.REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"] == [
        "rest_framework.authentication.SessionAuthentication"
    ]
    User.objects.create_user("alice", password="alice-pw")
    basic = base64.b64encode(b"alice:alice-pw").decode()
    client = Client()
    assert client.get("/api/tools/", HTTP_AUTHORIZATION=f"Basic {basic}").status_code == 403
    assert client.login(username="alice", password="alice-pw")
    assert client.get("/api/tools/").status_code == 200


def test_llm_worker_reloads_only_when_asked(settings: Any) -> None:
    settings.DEBUG = True  # db_worker's default for --reload
    parser = LlmWorker().create_parser("manage.py", "llm_worker")
    assert parser.parse_args([]).reload is False
    assert parser.parse_args(["--reload"]).reload is True
    assert "off by default" in parser.format_help()
