"""Fixtures of the API tests: users, authenticated clients, settings with test tools."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Conversation

TOOLS = [
    "tests.support.loop_tools.get_weather",
    "tests.support.loop_tools.get_time",
    "tests.support.loop_tools.delete_file",
    "tests.support.loop_tools.pick_color",
]

API_SETTINGS: dict[str, Any] = {
    "DEFAULT_PROVIDER": "echo",
    "PROVIDERS": {
        "echo": {"BACKEND": "echo", "MODEL": "echo"},
        "broken": {"BACKEND": "tests.api.fixtures.BrokenProvider", "MODEL": "broken"},
    },
    "TOOLS": TOOLS,
    "MAX_MESSAGE_CHARS": 1000,
    "MAX_MESSAGES_PER_REQUEST": 5,
    "MAX_METADATA_KEYS": 3,
}


@pytest.fixture(autouse=True)
def api_settings(settings: Any) -> dict[str, Any]:
    settings.LLM_CONVERSATIONS = API_SETTINGS
    # A fast hasher: users are created, and basic auth checked, in many tests.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return API_SETTINGS


@pytest.fixture
def empty_cache() -> Iterator[None]:
    """An empty cache before and after: throttle state lives in Django's cache
    (LocMemCache here)."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def user(db: None) -> User:
    return User.objects.create_user("alice", password="alice-pw")


@pytest.fixture
def other_user(db: None) -> User:
    return User.objects.create_user("mallory", password="mallory-pw")


@pytest.fixture
def client(user: User) -> APIClient:
    """Authenticated as ``user`` without touching sessions (keeps query counts exact)."""
    api = APIClient()
    api.force_authenticate(user)
    return api


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


@pytest.fixture
def other(other_user: User) -> APIClient:
    """Authenticated as ``other_user``."""
    api = APIClient()
    api.force_authenticate(other_user)
    return api


@pytest.fixture
def media_root(settings: Any, tmp_path: Path) -> Path:
    """Uploaded files go to a directory of the test's own."""
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


@pytest.fixture
def conversation(user: User) -> Conversation:
    return create_conversation(
        owner=user, title="Trip", messages=[{"role": "user", "content": "Hi"}]
    )


def calls_text(*calls: tuple[str, str, dict[str, Any]]) -> str:
    """A user message that makes the echo backend call these tools."""
    return json.dumps(
        {
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ]
        }
    )


def parse_sse_ids(body: bytes) -> list[tuple[int | None, str, dict[str, Any]]]:
    """Parse a whole event stream into ``(id, event, data)``, strictly; comments are skipped."""
    events = []
    text = body.decode()
    assert text.endswith("\n\n"), "a stream ends with a blank line"
    for block in text.split("\n\n")[:-1]:
        lines = block.split("\n")
        if all(line.startswith(":") for line in lines):
            continue  # a keep-alive comment
        event_id = None
        if lines[0].startswith("id: "):
            event_id = int(lines.pop(0).removeprefix("id: "))
        assert len(lines) == 2, block
        name, data = lines
        assert name.startswith("event: "), block
        assert data.startswith("data: "), block
        events.append(
            (event_id, name.removeprefix("event: "), json.loads(data.removeprefix("data: ")))
        )
    return events


def parse_sse(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Parse a whole event stream into ``(event, data)`` pairs, strictly."""
    return [(name, data) for _, name, data in parse_sse_ids(body)]


def joined(names: list[str], *texts: str) -> list[str]:
    """``names`` with each run of one of the ``texts`` event names kept once: how many
    pieces a reply's text is logged in depends on how fast it arrives."""
    return [n for i, n in enumerate(names) if not (n in texts and i and names[i - 1] == n)]
