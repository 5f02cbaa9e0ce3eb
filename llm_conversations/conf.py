"""Typed access to ``settings.LLM_CONVERSATIONS``, the app's one settings dict.

Values are read on every access so ``override_settings`` works in tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings as django_settings

DEFAULTS: dict[str, Any] = {
    "PROVIDERS": {"default": {"BACKEND": "echo", "MODEL": "echo"}},
    "DEFAULT_PROVIDER": "default",
    "TOOLS": [],
    "MAX_ITERATIONS": 8,
    "MAX_ITERATIONS_LIMIT": 32,
    "TOOL_RESULT_MAX_CHARS": 50_000,
    "TOOL_WORKERS": 4,
    "TOOL_TIMEOUT": 120.0,
    "RUN_TIMEOUT": 900.0,
    "BACKGROUND_RUNS": False,
    "TASK_BACKEND": "default",
    "LEASE_SECONDS": 60,
    "MAX_ATTEMPTS": 3,
    "EVENT_RETENTION_DAYS": 7,
    # Seconds between keep-alive comments of an event stream waiting for events.
    "SSE_HEARTBEAT_SECONDS": 15,
    # Seconds an Idempotency-Key is remembered.
    "IDEMPOTENCY_KEY_TTL": 86_400,
    "MAX_MESSAGE_CHARS": 100_000,
    "MAX_MESSAGES_PER_REQUEST": 100,
    "MAX_METADATA_KEYS": 50,
    "MAX_REPLY_CHARS": 200_000,
    # Bytes of one request body: room for a MAX_MESSAGE_CHARS message escaped
    # as JSON (\uXXXX pairs take 12 bytes a character) and more.
    "MAX_REQUEST_BYTES": 2 * 1024 * 1024,
    "PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "AUTHENTICATION_CLASSES": None,
}

# Seconds, or None for no limit.
OPTIONAL_DURATIONS = ("TOOL_TIMEOUT", "RUN_TIMEOUT")

# Seconds, a positive number (never None).
DURATIONS = ("SSE_HEARTBEAT_SECONDS",)

POSITIVE_INTEGERS = (
    "LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "EVENT_RETENTION_DAYS",
    "IDEMPOTENCY_KEY_TTL",
    "MAX_ITERATIONS",
    "MAX_ITERATIONS_LIMIT",
    "TOOL_RESULT_MAX_CHARS",
    "TOOL_WORKERS",
    "MAX_MESSAGE_CHARS",
    "MAX_MESSAGES_PER_REQUEST",
    "MAX_METADATA_KEYS",
    "MAX_REPLY_CHARS",
    "MAX_REQUEST_BYTES",
)


def user_settings() -> Mapping[str, Any]:
    """The raw ``LLM_CONVERSATIONS`` dict (empty when unset or not a dict).

    Empty too when Django settings are not configured, so a provider used
    from a plain script runs with the defaults.
    """
    if not django_settings.configured:
        return {}
    value = getattr(django_settings, "LLM_CONVERSATIONS", {})
    return value if isinstance(value, Mapping) else {}


def raw_setting(name: str) -> Any:
    """One setting as configured, or its default, without conversion.

    The system checks read this so a bad value is reported rather than coerced.
    """
    return user_settings().get(name, DEFAULTS[name])


class Settings:
    """Each setting with its default; see the README for what each one does."""

    def _get(self, name: str) -> Any:
        return raw_setting(name)

    @property
    def PROVIDERS(self) -> dict[str, dict[str, Any]]:
        return dict(self._get("PROVIDERS"))

    @property
    def DEFAULT_PROVIDER(self) -> str:
        return str(self._get("DEFAULT_PROVIDER"))

    @property
    def TOOLS(self) -> list[str]:
        return list(self._get("TOOLS"))

    @property
    def MAX_ITERATIONS(self) -> int:
        return int(self._get("MAX_ITERATIONS"))

    @property
    def MAX_ITERATIONS_LIMIT(self) -> int:
        return int(self._get("MAX_ITERATIONS_LIMIT"))

    @property
    def TOOL_RESULT_MAX_CHARS(self) -> int:
        return int(self._get("TOOL_RESULT_MAX_CHARS"))

    @property
    def TOOL_WORKERS(self) -> int:
        return int(self._get("TOOL_WORKERS"))

    @property
    def TOOL_TIMEOUT(self) -> float | None:
        return _duration(self._get("TOOL_TIMEOUT"))

    @property
    def RUN_TIMEOUT(self) -> float | None:
        return _duration(self._get("RUN_TIMEOUT"))

    @property
    def BACKGROUND_RUNS(self) -> bool:
        return bool(self._get("BACKGROUND_RUNS"))

    @property
    def TASK_BACKEND(self) -> str:
        return str(self._get("TASK_BACKEND"))

    @property
    def LEASE_SECONDS(self) -> int:
        return int(self._get("LEASE_SECONDS"))

    @property
    def MAX_ATTEMPTS(self) -> int:
        return int(self._get("MAX_ATTEMPTS"))

    @property
    def EVENT_RETENTION_DAYS(self) -> int:
        return int(self._get("EVENT_RETENTION_DAYS"))

    @property
    def SSE_HEARTBEAT_SECONDS(self) -> float:
        return float(self._get("SSE_HEARTBEAT_SECONDS"))

    @property
    def IDEMPOTENCY_KEY_TTL(self) -> int:
        return int(self._get("IDEMPOTENCY_KEY_TTL"))

    @property
    def MAX_MESSAGE_CHARS(self) -> int:
        return int(self._get("MAX_MESSAGE_CHARS"))

    @property
    def MAX_MESSAGES_PER_REQUEST(self) -> int:
        return int(self._get("MAX_MESSAGES_PER_REQUEST"))

    @property
    def MAX_METADATA_KEYS(self) -> int:
        return int(self._get("MAX_METADATA_KEYS"))

    @property
    def MAX_REPLY_CHARS(self) -> int:
        return int(self._get("MAX_REPLY_CHARS"))

    @property
    def MAX_REQUEST_BYTES(self) -> int:
        return int(self._get("MAX_REQUEST_BYTES"))

    @property
    def PERMISSION_CLASSES(self) -> list[str]:
        return list(self._get("PERMISSION_CLASSES"))

    @property
    def AUTHENTICATION_CLASSES(self) -> list[str] | None:
        value = self._get("AUTHENTICATION_CLASSES")
        return None if value is None else list(value)


def _duration(value: Any) -> float | None:
    return None if value is None else float(value)


conf = Settings()
