"""The values of a full-fidelity line: a run and a message row as records, the
attachments a message shows, timestamps and decimals as the export writes them
(:mod:`~llm_conversations.conversations.transfer.export` streams the lines).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from llm_conversations.conversations.history import stored_message
from llm_conversations.models import Run

__all__ = [
    "ATTACHMENT_COLUMNS",
    "ATTACHMENT_KEYS",
    "USAGE_COLUMNS",
    "decimal_text",
    "message_record",
    "run_record",
    "timestamp",
]

# The token columns of a run and of a message row.
USAGE_COLUMNS = ("input_tokens", "output_tokens", "total_tokens", "cached_tokens")


def timestamp(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with microseconds, the one form every export writes."""
    return None if moment is None else moment.astimezone(UTC).isoformat(timespec="microseconds")


def decimal_text(value: Decimal | None) -> str | None:
    """A decimal as exact text (a cost), or ``None``."""
    return None if value is None else str(value)


def _usage(values: Mapping[str, Any]) -> dict[str, int | None]:
    return {name: values[name] for name in USAGE_COLUMNS}


def run_record(run: Run) -> dict[str, Any]:
    """A run's record in a full-fidelity line."""
    return {
        "id": str(run.pk),
        "status": run.status,
        "termination_reason": run.termination_reason,
        "provider": run.provider,
        "model": run.model,
        "instructions": run.instructions,
        "parameters": run.parameters,
        "tools": [spec.to_stored() for spec in run.offered_tools],
        "max_iterations": run.max_iterations,
        "iterations": run.iterations,
        "usage": {name: getattr(run, name) for name in USAGE_COLUMNS},
        "cost": decimal_text(run.cost),
        "error_type": run.error_type,
        "error_message": run.error_message,
        "pending_tool_calls": [waiting.to_stored() for waiting in run.waiting_calls],
        "decisions": dict(run.decisions),
        "attempts": run.attempts,
        "created_at": timestamp(run.created_at),
        "updated_at": timestamp(run.updated_at),
        "started_at": timestamp(run.started_at),
        "finished_at": timestamp(run.finished_at),
    }


# What an export says of each attachment a message shows: a reference, and
# with Attachments.INLINE the bytes as base64 in "data" (docs/data.md).
ATTACHMENT_KEYS = {
    "id": "attachment_id",
    "filename": "attachment__filename",
    "mime_type": "attachment__mime_type",
    "size": "attachment__size",
    "sha256": "attachment__sha256",
}
ATTACHMENT_COLUMNS = tuple(ATTACHMENT_KEYS.values())


def message_record(
    row: Mapping[str, Any],
    feedback: list[dict[str, Any]],
    attachments: list[dict[str, Any]],
) -> dict[str, Any]:
    """A message row's record in a full-fidelity line, with its ratings and the
    attachments it shows."""
    usage = _usage(row)
    return {
        "id": str(row["id"]),
        **(stored := stored_message(row).to_stored()),
        "reasoning": stored.get("reasoning"),
        "run": None if row["run_id"] is None else str(row["run_id"]),
        "provider": row["provider"],
        "model": row["model"],
        "finish_reason": row["finish_reason"],
        "usage": usage if any(value is not None for value in usage.values()) else None,
        "cost": decimal_text(row["cost"]),
        "parsed": row["parsed"],
        "metadata": row["metadata"],
        "created_at": timestamp(row["created_at"]),
        "hidden_at": None if row["hidden_at"] is None else timestamp(row["hidden_at"]),
        "hidden_reason": row["hidden_reason"],
        "feedback": feedback,
        "attachments": [{**item, "id": str(item["id"])} for item in attachments],
    }
