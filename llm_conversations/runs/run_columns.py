"""What the conditional updates of a run set: a counted model call, an end, a
released or renewed lease, and the error text an end records.

:mod:`llm_conversations.runs.transitions` and
:mod:`llm_conversations.runs.leases` make the updates; the values are computed
here, without a query.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from llm_conversations.conf import conf
from llm_conversations.core.completions import Usage
from llm_conversations.core.text import storable_text
from llm_conversations.exceptions import LLMConversationsError
from llm_conversations.models import Run, RunStatus, TerminationReason

__all__ = ["RELEASED", "SERVER_ERROR", "counted_fields", "end_fields", "error_text", "lease_expiry"]

# Stored instead of the text of an unexpected error, which may hold SQL or data.
SERVER_ERROR = "The run failed on the server; the server log has the details."

RELEASED: dict[str, Any] = {"lease_owner": "", "lease_expires_at": None}
"""The lease columns of a run no process holds."""


def lease_expiry() -> datetime:
    """When a lease taken or renewed now expires."""
    return timezone.now() + timedelta(seconds=conf.LEASE_SECONDS)


def error_text(error: BaseException) -> str:
    """What a run records (and clients see) about the error that ended it.

    The library's own errors carry messages written for people (provider
    errors are redacted at their source); anything else may hold SQL or data,
    so it is logged by the caller and recorded as a stable sentence.
    """
    if isinstance(error, LLMConversationsError):
        return storable_text(error.message)[:2000]
    return SERVER_ERROR


def end_fields(
    status: RunStatus, reason: TerminationReason, error: BaseException | None = None
) -> dict[str, Any]:
    """What the update that ends a run sets."""
    fields: dict[str, Any] = {
        "status": status,
        "termination_reason": reason,
        "waiting_calls": [],
        "waiting_turn": {},
        "finished_at": timezone.now(),
        **RELEASED,
    }
    if error is not None:
        fields["error_type"] = type(error).__name__
        fields["error_message"] = error_text(error)
    return fields


def counted_fields(
    run: Run,
    usage: Usage,
    cost: Decimal | None,
    answered_by: str,
    model: str | None,
    context: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The run's columns once a model call is counted: its totals with the call's
    usage and cost added, who answered, and what the call sent (``context``).

    Absolute values, not ``F()`` increments: the lease holder is the one writer of
    these columns, so its instance stays the row without reading it back.
    """
    return {
        "iterations": run.iterations + 1,
        "input_tokens": run.input_tokens + usage.input_tokens,
        "output_tokens": run.output_tokens + usage.output_tokens,
        "total_tokens": run.total_tokens + (usage.total_tokens or 0),
        "cached_tokens": run.cached_tokens + (usage.cached_tokens or 0),
        "cache_write_tokens": run.cache_write_tokens + (usage.cache_write_tokens or 0),
        "reasoning_tokens": run.reasoning_tokens + (usage.reasoning_tokens or 0),
        "cost": run.cost + (cost or Decimal(0)),
        "answered_by": answered_by,
        **({"model": model} if model else {}),
        **(context or {}),
    }
