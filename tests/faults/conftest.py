"""Fixtures of the fault-injection suite: the fake provider server, settings, a client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from llm_conversations.providers import get_provider
from tests.api.conftest import client, user

from . import tools

# The API tests' authenticated user and client.
__all__ = ["client", "user"]
from .server import API_KEY, FakeProvider

BACKENDS = ("openai", "anthropic", "gemini", "ollama", "openai_responses")
TIMEOUT = 0.5
MAX_REPLY_CHARS = 2000


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    """The fake provider server, started for one test and always shut down."""
    provider = FakeProvider()
    server = provider.start()
    try:
        yield provider
    finally:
        tools.release.set()
        server.close()
        tools.release.clear()


Configure = Callable[..., list[float]]


@pytest.fixture
def configure(settings: Any, fake: FakeProvider) -> Configure:
    """Point one provider entry per backend at ``fake``; returns ``backend``'s retry sleeps.

    ``entry`` overrides keys of every entry (``MAX_RETRIES``, ``TIMEOUT``). The
    providers sleep between retries through a recorder, so retries cost no time.
    """

    def apply(backend: str, **entry: Any) -> list[float]:
        urls = fake.base_urls()
        settings.LLM_CONVERSATIONS = {
            "DEFAULT_PROVIDER": "openai",
            "PROVIDERS": {
                name: {
                    "BACKEND": name,
                    "MODEL": "fault-model",
                    "API_KEY": API_KEY,
                    "BASE_URL": urls[name],
                    "TIMEOUT": TIMEOUT,
                    "CONNECT_TIMEOUT": TIMEOUT,
                    "MAX_RETRIES": 1,
                    **entry,
                }
                for name in BACKENDS
            },
            "TOOLS": tools.TOOLS,
            "MAX_REPLY_CHARS": MAX_REPLY_CHARS,
        }
        sleeps: list[float] = []
        # Only the provider under test is built (each build makes an httpx client).
        get_provider(backend)._sleep = sleeps.append
        return sleeps

    return apply


@pytest.fixture
def backup() -> Iterator[FakeProvider]:
    """The fallback's own fake server."""
    provider = FakeProvider()
    server = provider.start()
    try:
        yield provider
    finally:
        server.close()


@pytest.fixture
def entries(settings: Any, fake: FakeProvider, backup: FakeProvider) -> Any:
    """Configure ``primary`` (falling back to ``backup``), each with the extra keys given;
    retries sleep no time."""

    def apply(backup_entry: dict[str, Any] | None = None, **primary: Any) -> None:
        common = {"MODEL": "fault-model", "API_KEY": API_KEY, "TIMEOUT": TIMEOUT}
        settings.LLM_CONVERSATIONS = {
            "DEFAULT_PROVIDER": "primary",
            "PROVIDERS": {
                "primary": {
                    **common,
                    "BACKEND": "openai",
                    "BASE_URL": fake.base_urls()["openai"],
                    "MAX_RETRIES": 1,
                    "FALLBACKS": ["backup"],
                    **primary,
                },
                "backup": {
                    **common,
                    "BACKEND": "anthropic",
                    "BASE_URL": backup.base_urls()["anthropic"],
                    "MODEL": "backup-model",
                    "MAX_RETRIES": 1,
                    **(backup_entry or {}),
                },
            },
            "TOOLS": tools.TOOLS,
        }
        for name in ("primary", "backup"):
            get_provider(name)._sleep = lambda seconds: None

    return apply
