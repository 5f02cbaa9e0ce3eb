"""The fast path of the message representation, built without serializer overhead.

A long history is read through the message list endpoint page by page, so a
message row becomes its dict in one function call. ``MessageSerializer``
declares the same fields for the schema (a test keeps the two equal).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_conversations.conf import conf
from llm_conversations.core.messages import Reasoning, Role
from llm_conversations.core.model_info import cost_text
from llm_conversations.core.stored_rows import chat_message_from_checked_row
from llm_conversations.models import Message

__all__ = [
    "MESSAGE_COLUMNS",
    "SHARED_HIDDEN",
    "message_data",
    "message_row",
    "shared_message_data",
    "shown_reasoning",
]

# The columns a message representation needs, as ``QuerySet.values()`` names them.
MESSAGE_COLUMNS = (
    "id",
    "position",
    "role",
    "content",
    "content_parts",
    "reasoning",
    "tool_calls",
    "tool_call_id",
    "is_error",
    "run_id",
    "created_at",
    "model",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "parsed",
    "cost",
    "hidden_at",
    "hidden_reason",
)


def message_data(row: Mapping[str, Any]) -> dict[str, Any]:
    """A message: the ``ChatMessage.to_wire()`` fields plus the stored ones.

    Tool call arguments are JSON text, as in the OpenAI request form.
    ``model`` and ``usage`` are set on assistant turns that a provider
    answered, ``None`` otherwise; ``parsed`` on structured answers that
    matched their run's ``response_format``. ``feedback`` is the caller's
    rating when the row carries the ``FEEDBACK_COLUMNS`` of
    :func:`~llm_conversations.conversations.feedback.with_feedback`, else ``None``.
    A message of content parts has them as ``content``, in their stored form
    (images and files by ``attachment_id``; ``attachments/{id}/`` describes
    each). ``reasoning`` is the reasoning text of the turn (:func:`shown_reasoning`).
    """
    message = chat_message_from_checked_row(
        row["role"],
        row["content"],
        row["tool_calls"],
        row["tool_call_id"],
        row["is_error"],
        row["content_parts"],
        row["reasoning"],
    )
    if message.parts is None:
        data = message.to_wire()
    else:
        data = {"role": row["role"], "content": [part.to_stored() for part in message.parts]}
        if message.tool_call_id is not None:
            data["tool_call_id"] = message.tool_call_id
    assistant = row["role"] == Role.ASSISTANT
    data["id"] = row["id"]
    data["position"] = row["position"]
    data["is_error"] = row["is_error"]
    data["run"] = row["run_id"]
    data["created_at"] = row["created_at"]
    data["model"] = (row["model"] or None) if assistant else None
    data["finish_reason"] = (row["finish_reason"] or None) if assistant else None
    data["parsed"] = row["parsed"]
    data["reasoning"] = shown_reasoning(message.reasoning)
    data["usage"] = (
        {
            "input_tokens": row["input_tokens"],
            "output_tokens": row["output_tokens"],
            "total_tokens": row["total_tokens"],
            "cached_tokens": row["cached_tokens"],
            "cache_write_tokens": row["cache_write_tokens"],
            "reasoning_tokens": row["reasoning_tokens"],
        }
        if assistant and row["input_tokens"] is not None
        else None
    )
    data["cost"] = cost_text(row["cost"]) if assistant else None
    data["hidden_at"] = row["hidden_at"]
    data["hidden_reason"] = row["hidden_reason"]
    rating = row.get("feedback_rating")
    data["feedback"] = (
        None if rating is None else {"rating": rating, "comment": row["feedback_comment"]}
    )
    return data


# What a reader of a share link does not see of a message: the owner's run,
# what their calls used and cost, their rating, and whether and why they hid it
# (a snapshot shows no hidden turn).
SHARED_HIDDEN = ("run", "usage", "cost", "feedback", "hidden_at", "hidden_reason")


def shared_message_data(row: Mapping[str, Any], position: int) -> dict[str, Any]:
    """A message of a shared snapshot: :func:`message_data` without ``SHARED_HIDDEN``,
    at ``position``, its place in the snapshot (withdrawn turns leave no gap)."""
    data = message_data(row)
    for key in SHARED_HIDDEN:
        del data[key]
    data["position"] = position
    return data


def shown_reasoning(parts: tuple[Reasoning, ...] | None) -> list[dict[str, str]] | None:
    """The reasoning text an end user may see: ``[{"kind", "text"}]`` when
    ``SHOW_REASONING`` is on and the turn has any, else ``None``. Opaque
    reasoning data (signatures, redacted or encrypted reasoning) is never shown."""
    if not parts or not conf.SHOW_REASONING:
        return None
    shown = [{"kind": part.kind.value, "text": part.text} for part in parts if part.text]
    return shown or None


def message_row(message: Message) -> dict[str, Any]:
    """The ``MESSAGE_COLUMNS`` of a model instance, for :func:`message_data`."""
    return {column: getattr(message, column) for column in MESSAGE_COLUMNS}
