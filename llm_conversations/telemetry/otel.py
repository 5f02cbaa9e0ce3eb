"""What the app's spans and metrics share: the OpenTelemetry API, imported on first
use (:func:`otel_api`, ``None`` without the package), the instruments, the
tracer, the attribute values of providers and errors, and failing a span.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

from llm_conversations.conf import conf

__all__ = [
    "COST_METRIC",
    "INSTRUMENTATION",
    "PROVIDER_NAMES",
    "OtelApi",
    "capture_content",
    "current_context",
    "enabled",
    "entry_backend",
    "error_type",
    "instruments",
    "mark_failed",
    "otel_api",
    "provider_name",
    "tracer",
]

INSTRUMENTATION = "llm_conversations"
"""The instrumentation scope of every span and metric."""
COST_METRIC = "llm_conversations.cost"
"""The counter of dollars replies cost (no GenAI convention names cost)."""
# gen_ai.provider.name per backend: the convention's well-known values where one exists.
PROVIDER_NAMES = {
    "openai": "openai",
    "openai_responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "ollama": "ollama",
    "echo": "echo",
}


@dataclass(frozen=True, slots=True)
class OtelApi:
    """The OpenTelemetry API modules the app uses."""

    context: ModuleType
    metrics: ModuleType
    trace: ModuleType


@cache
def otel_api() -> OtelApi | None:
    """The OpenTelemetry API modules, or ``None`` when the package is not installed."""
    try:
        from opentelemetry import context, metrics, trace
    except ImportError:
        return None
    return OtelApi(context, metrics, trace)


def enabled() -> bool:
    """Whether ``opentelemetry-api`` is installed (whether anything is recorded)."""
    return otel_api() is not None


@cache
def instruments() -> dict[str, Any]:
    """The histograms and the counter, made once (the API's proxies follow a
    meter provider set later)."""
    api = otel_api()
    assert api is not None
    from llm_conversations import __version__

    meter = api.metrics.get_meter(INSTRUMENTATION, __version__)
    return {
        "tokens": meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
        ),
        "duration": meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration."
        ),
        "cost": meter.create_counter(
            COST_METRIC, unit="{USD}", description="Dollars the model replies of runs cost."
        ),
    }


def tracer(api: OtelApi) -> Any:
    """The tracer of the app's spans."""
    from llm_conversations import __version__

    return api.trace.get_tracer(INSTRUMENTATION, __version__)


def capture_content() -> bool:
    """Whether message text, tool arguments and results are recorded."""
    return conf.TELEMETRY_CAPTURE_CONTENT


def provider_name(backend: str) -> str:
    """``gen_ai.provider.name`` of an adapter's backend (its own name when the
    convention has none)."""
    return PROVIDER_NAMES.get(backend, backend)


def entry_backend(entry: str) -> str:
    """The backend of a ``PROVIDERS`` entry, or the entry's name."""
    settings = conf.PROVIDERS.get(entry)
    backend = settings.get("BACKEND") if isinstance(settings, Mapping) else None
    return backend if isinstance(backend, str) else entry


def error_type(exc: BaseException) -> str:
    """``error.type`` of an exception: its fully qualified class name."""
    kind = type(exc)
    return f"{kind.__module__}.{kind.__qualname__}"


def current_context() -> Any:
    """The active OpenTelemetry context, to parent spans made in other threads."""
    api = otel_api()
    return None if api is None else api.context.get_current()


def mark_failed(span: Any, kind: str) -> None:
    """Mark ``span`` failed. The description is the type alone: an exception's
    text may quote a model's or a tool's words."""
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))
