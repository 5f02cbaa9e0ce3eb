"""Typed access to ``settings.LLM_CONVERSATIONS``, the app's one settings dict.

Values are read on every access so ``override_settings`` works in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, Literal, TypeVar, cast, get_args

from django.conf import settings as django_settings

_T = TypeVar("_T")

BusyStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
"""What a run start does while another run of the conversation is active."""
BUSY_STRATEGIES: tuple[BusyStrategy, ...] = get_args(BusyStrategy)

DEFAULTS: dict[str, Any] = {
    "PROVIDERS": {"default": {"BACKEND": "echo", "MODEL": "echo"}},
    "DEFAULT_PROVIDER": "default",
    # The PROVIDERS entry that writes automatic titles; None: no automatic titles.
    "TITLE_PROVIDER": None,
    # The PROVIDERS entry that writes the summaries of the "summarize" context
    # strategy (docs/context.md); None: that strategy is unavailable.
    "SUMMARY_PROVIDER": None,
    "TOOLS": [],
    # The tools a run offers when it names none (docs/tools.md#tools-offered-by-default):
    # None, every tool of TOOLS and those of the MCP_SERVERS entries with
    # OFFER_BY_DEFAULT; or a list of tool names, those only.
    "DEFAULT_TOOLS": None,
    # Tool servers spoken to over the Model Context Protocol (docs/mcp.md).
    "MCP_SERVERS": {},
    # Seconds a server's tool list is reused before it is listed again.
    "MCP_TOOLS_TTL": 300,
    "MAX_ITERATIONS": 8,
    "MAX_ITERATIONS_LIMIT": 32,
    "TOOL_RESULT_MAX_CHARS": 50_000,
    "TOOL_WORKERS": 4,
    "TOOL_TIMEOUT": 120.0,
    "RUN_TIMEOUT": 900.0,
    # Repair rounds a run with a response_format gets for an answer that does
    # not match its schema, before it fails with invalid_output.
    "STRUCTURED_OUTPUT_REPAIRS": 1,
    "BACKGROUND_RUNS": False,
    # What a run start does while another run of the conversation is active
    # (docs/busy-conversations.md): "reject", "enqueue", "interrupt", "rollback".
    "BUSY_STRATEGY": "reject",
    "TASK_BACKEND": "default",
    "LEASE_SECONDS": 60,
    "MAX_ATTEMPTS": 3,
    # Seconds a background run may stay queued after its task was enqueued
    # before the reaper enqueues another (the first may be lost with a worker
    # that took it and died before claiming the run).
    "REQUEUE_SECONDS": 300,
    # Requests of one process that may prepare runs at once (None: no limit),
    # how many may wait in line for their turn (None: no limit; one more is
    # refused at once), and the seconds one waits before a 503 server_busy
    # (docs/deployment.md#bursts-of-run-starts).
    "RUN_START_CONCURRENCY": 1,
    "RUN_START_QUEUE": 1000,
    "RUN_START_WAIT_SECONDS": 30,
    "EVENT_RETENTION_DAYS": 7,
    # Days a conversation may stay idle (no new message) before it is purged;
    # None keeps conversations forever.
    "CONVERSATION_RETENTION_DAYS": None,
    # Days a trashed conversation is kept (restorable) before it is purged;
    # None keeps the trash until it is emptied by hand.
    "TRASH_RETENTION_DAYS": 30,
    # Seconds between keep-alive comments of an event stream waiting for events.
    "SSE_HEARTBEAT_SECONDS": 15,
    # Seconds an Idempotency-Key is remembered.
    "IDEMPOTENCY_KEY_TTL": 86_400,
    "MAX_MESSAGE_CHARS": 100_000,
    "MAX_MESSAGES_PER_REQUEST": 100,
    "MAX_METADATA_KEYS": 50,
    "MAX_REPLY_CHARS": 200_000,
    # Whether the API shows end users the reasoning text models return
    # (opaque reasoning data is never shown).
    "SHOW_REASONING": False,
    # Bytes of one request body: room for a MAX_MESSAGE_CHARS message escaped
    # as JSON (\uXXXX pairs take 12 bytes a character) and more.
    "MAX_REQUEST_BYTES": 2 * 1024 * 1024,
    "PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "AUTHENTICATION_CLASSES": None,
    # Which providers, models, tools and iteration limits each user's runs may use.
    "RUN_POLICY": "llm_conversations.runs.policy.RunPolicy",
    # Run starts and retries per user through the API, as DRF writes rates
    # ("20/min"); None: not throttled.
    "RUN_RATE": None,
    # Active (queued, running, waiting) runs one user may have; None: no limit.
    "MAX_ACTIVE_RUNS_PER_USER": None,
    # Runs that may wait behind one conversation's active run (if_busy
    # "enqueue"); None: no limit.
    "MAX_WAITING_RUNS": 10,
    # Budgets (docs/costs.md#budgets): None, or {"tokens": int, "cost": "5.00"}
    # (either or both) per user per UTC day, per user per UTC month, and per
    # conversation; BUDGET_HOOK: a dotted path to a callable(user) returning a
    # user's own {"daily": ..., "monthly": ..., "conversation": ...}.
    "USER_DAILY_BUDGET": None,
    "USER_MONTHLY_BUDGET": None,
    "CONVERSATION_BUDGET": None,
    "BUDGET_HOOK": None,
    # Attachments (docs/attachments.md): the largest upload in bytes, the MIME
    # types accepted (detected from the bytes), the most pixels an image may
    # decode to (decompression bombs), the most pages of a PDF, and the hours
    # an attachment no message shows is kept (None: kept forever).
    "ATTACHMENT_MAX_BYTES": 10 * 1024 * 1024,
    "ATTACHMENT_TYPES": ["image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"],
    "ATTACHMENT_MAX_PIXELS": 25_000_000,
    "ATTACHMENT_MAX_PDF_PAGES": 100,
    "ORPHAN_ATTACHMENT_HOURS": 24,
    # Whether OpenTelemetry spans carry message text, tool arguments and results
    # (docs/telemetry.md); off, they carry names, models, usage and errors only.
    "TELEMETRY_CAPTURE_CONTENT": False,
    # A request body field the API does not know is refused (400 unknown_field);
    # False ignores it, for clients newer than the server.
    "STRICT_REQUEST_FIELDS": True,
    # Webhooks (docs/webhooks.md): endpoints for every run's events, by name
    # ({"URL": ..., "SECRET": "whsec_...", "EVENTS": [...]}, EVENTS optional:
    # all); attempts per message, the first retry's delay in seconds (doubled
    # each time), one attempt's timeout; and the hosts a webhook may reach
    # (None: any host whose addresses are all public).
    "WEBHOOKS": {},
    "WEBHOOK_MAX_ATTEMPTS": 6,
    "WEBHOOK_BACKOFF_SECONDS": 10.0,
    "WEBHOOK_TIMEOUT": 10.0,
    "WEBHOOK_ALLOWED_HOSTS": None,
    # Share links (docs/sharing.md): whether only signed-in users may read a
    # shared snapshot (False: anyone with the link), and the reads of shared
    # snapshots per caller, as DRF writes rates ("60/min"); None: not throttled.
    "SHARE_LINKS_REQUIRE_LOGIN": False,
    "SHARE_RATE": None,
}

# True or False, nothing else (a string such as "false" would be true).
BOOLEANS = (
    "TELEMETRY_CAPTURE_CONTENT",
    "STRICT_REQUEST_FIELDS",
    "SHOW_REASONING",
    "SHARE_LINKS_REQUIRE_LOGIN",
)

# Seconds, or None for no limit.
OPTIONAL_DURATIONS = ("TOOL_TIMEOUT", "RUN_TIMEOUT")

# Seconds, a positive number (never None).
DURATIONS = (
    "SSE_HEARTBEAT_SECONDS",
    "MCP_TOOLS_TTL",
    "RUN_START_WAIT_SECONDS",
    "WEBHOOK_BACKOFF_SECONDS",
    "WEBHOOK_TIMEOUT",
)

# Counts that may be zero.
NON_NEGATIVE_INTEGERS = ("STRUCTURED_OUTPUT_REPAIRS",)

# A positive integer, or None for no limit.
OPTIONAL_POSITIVE_INTEGERS = (
    "CONVERSATION_RETENTION_DAYS",
    "RUN_START_CONCURRENCY",
    "RUN_START_QUEUE",
)

POSITIVE_INTEGERS = (
    "LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "REQUEUE_SECONDS",
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
    "WEBHOOK_MAX_ATTEMPTS",
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


class _Setting(Generic[_T]):
    """One setting, read (and converted) on every access so ``override_settings`` works."""

    def __init__(self, convert: Callable[[Any], _T]) -> None:
        self._convert = convert

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, instance: object, owner: type) -> _T:
        return self._convert(raw_setting(self._name))


def _optional(convert: Callable[[Any], _T]) -> Callable[[Any], _T | None]:
    return lambda value: None if value is None else convert(value)


class Settings:
    """Each setting with its default; see the README for what each one does."""

    PROVIDERS: _Setting[dict[str, dict[str, Any]]] = _Setting(dict)
    DEFAULT_PROVIDER: _Setting[str] = _Setting(str)
    TITLE_PROVIDER: _Setting[str | None] = _Setting(_optional(str))
    SUMMARY_PROVIDER: _Setting[str | None] = _Setting(_optional(str))
    TOOLS: _Setting[list[str]] = _Setting(list)
    DEFAULT_TOOLS: _Setting[list[str] | None] = _Setting(_optional(list))
    MCP_SERVERS: _Setting[dict[str, Any]] = _Setting(dict)
    MCP_TOOLS_TTL: _Setting[float] = _Setting(float)
    MAX_ITERATIONS: _Setting[int] = _Setting(int)
    MAX_ITERATIONS_LIMIT: _Setting[int] = _Setting(int)
    TOOL_RESULT_MAX_CHARS: _Setting[int] = _Setting(int)
    TOOL_WORKERS: _Setting[int] = _Setting(int)
    TOOL_TIMEOUT: _Setting[float | None] = _Setting(_optional(float))
    RUN_TIMEOUT: _Setting[float | None] = _Setting(_optional(float))
    STRUCTURED_OUTPUT_REPAIRS: _Setting[int] = _Setting(int)
    BACKGROUND_RUNS: _Setting[bool] = _Setting(bool)
    BUSY_STRATEGY: _Setting[BusyStrategy] = _Setting(lambda value: cast(BusyStrategy, value))
    MAX_WAITING_RUNS: _Setting[int | None] = _Setting(_optional(int))
    TASK_BACKEND: _Setting[str] = _Setting(str)
    LEASE_SECONDS: _Setting[int] = _Setting(int)
    MAX_ATTEMPTS: _Setting[int] = _Setting(int)
    REQUEUE_SECONDS: _Setting[int] = _Setting(int)
    RUN_START_CONCURRENCY: _Setting[int | None] = _Setting(_optional(int))
    RUN_START_QUEUE: _Setting[int | None] = _Setting(_optional(int))
    RUN_START_WAIT_SECONDS: _Setting[float] = _Setting(float)
    EVENT_RETENTION_DAYS: _Setting[int] = _Setting(int)
    CONVERSATION_RETENTION_DAYS: _Setting[int | None] = _Setting(_optional(int))
    TRASH_RETENTION_DAYS: _Setting[int | None] = _Setting(_optional(int))
    SSE_HEARTBEAT_SECONDS: _Setting[float] = _Setting(float)
    IDEMPOTENCY_KEY_TTL: _Setting[int] = _Setting(int)
    MAX_MESSAGE_CHARS: _Setting[int] = _Setting(int)
    MAX_MESSAGES_PER_REQUEST: _Setting[int] = _Setting(int)
    MAX_METADATA_KEYS: _Setting[int] = _Setting(int)
    MAX_REPLY_CHARS: _Setting[int] = _Setting(int)
    SHOW_REASONING: _Setting[bool] = _Setting(bool)
    MAX_REQUEST_BYTES: _Setting[int] = _Setting(int)
    PERMISSION_CLASSES: _Setting[list[str]] = _Setting(list)
    AUTHENTICATION_CLASSES: _Setting[list[str] | None] = _Setting(_optional(list))
    RUN_POLICY: _Setting[str] = _Setting(str)
    RUN_RATE: _Setting[str | None] = _Setting(_optional(str))
    MAX_ACTIVE_RUNS_PER_USER: _Setting[int | None] = _Setting(_optional(int))
    USER_DAILY_BUDGET: _Setting[dict[str, Any] | None] = _Setting(_optional(dict))
    USER_MONTHLY_BUDGET: _Setting[dict[str, Any] | None] = _Setting(_optional(dict))
    CONVERSATION_BUDGET: _Setting[dict[str, Any] | None] = _Setting(_optional(dict))
    BUDGET_HOOK: _Setting[str | None] = _Setting(_optional(str))
    ATTACHMENT_MAX_BYTES: _Setting[int] = _Setting(int)
    ATTACHMENT_TYPES: _Setting[frozenset[str]] = _Setting(frozenset)
    ATTACHMENT_MAX_PIXELS: _Setting[int] = _Setting(int)
    ATTACHMENT_MAX_PDF_PAGES: _Setting[int] = _Setting(int)
    ORPHAN_ATTACHMENT_HOURS: _Setting[int | None] = _Setting(_optional(int))
    TELEMETRY_CAPTURE_CONTENT: _Setting[bool] = _Setting(bool)
    STRICT_REQUEST_FIELDS: _Setting[bool] = _Setting(bool)
    WEBHOOKS: _Setting[dict[str, dict[str, Any]]] = _Setting(dict)
    WEBHOOK_MAX_ATTEMPTS: _Setting[int] = _Setting(int)
    WEBHOOK_BACKOFF_SECONDS: _Setting[float] = _Setting(float)
    WEBHOOK_TIMEOUT: _Setting[float] = _Setting(float)
    WEBHOOK_ALLOWED_HOSTS: _Setting[list[str] | None] = _Setting(_optional(list))
    SHARE_LINKS_REQUIRE_LOGIN: _Setting[bool] = _Setting(bool)
    SHARE_RATE: _Setting[str | None] = _Setting(_optional(str))


conf = Settings()
