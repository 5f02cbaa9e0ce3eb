"""The fast path of the message representation, built without serializer overhead.

A long history is read through the message list endpoint page by page, so a
message row becomes its dict in one function call. ``MessageSerializer``
declares the same fields for the schema (a test keeps the two equal).

The rows come from :func:`message_rows`: fetched by a cursor, not through the
ORM's per-value converters, with ids and times already the text the JSON
holds, so neither the ORM nor the JSON encoder calls a function per value.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import QuerySet

from llm_conversations.conf import conf
from llm_conversations.conversations.history import stored_message
from llm_conversations.core.messages import Reasoning, Role
from llm_conversations.core.model_info import cost_text
from llm_conversations.core.reasoning import ReasoningKind, thoughts
from llm_conversations.models import Message

__all__ = [
    "MESSAGE_COLUMNS",
    "SHARED_HIDDEN",
    "compacted_by",
    "message_data",
    "message_row",
    "message_rows",
    "represented_rows",
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

    ``row`` is one of :func:`message_rows` (or :func:`message_row`): JSON
    decoded, ids and times as text.

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
    message = stored_message(row)
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
    data["compacted_by"] = compacted_by(message.reasoning)
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
    shown = [{"kind": part.kind.value, "text": part.text} for part in thoughts(parts) if part.text]
    return shown or None


def compacted_by(parts: tuple[Reasoning, ...] | None) -> str | None:
    """The backend whose compacted state a turn carries (``compact`` strategy), else
    ``None``: where that provider's later calls start reading. The state itself is
    never shown."""
    made = [part.provider for part in parts or () if part.kind is ReasoningKind.COMPACTION]
    return made[-1] if made else None


def message_row(message: Message) -> dict[str, Any]:
    """The ``MESSAGE_COLUMNS`` of a model instance, for :func:`message_data`."""
    row = {column: getattr(message, column) for column in MESSAGE_COLUMNS}
    for column in _UUIDS:
        row[column] = _uuid_text(row[column])
    for column in _TIMES:
        row[column] = _time_text(row[column])
    return row


def message_rows(messages: QuerySet[Message], *extra: str) -> list[dict[str, Any]]:
    """``messages.values(*MESSAGE_COLUMNS, *extra)`` for :func:`message_data`, in one
    query: JSON decoded, ids and times as the text the API writes.

    The rows are fetched by a cursor and made by :func:`represented_rows`.
    ``extra`` columns (annotations) are handed as the database returns them.
    """
    columns = (*MESSAGE_COLUMNS, *extra)
    query = messages.values_list(*columns)
    try:
        sql, params = query.query.get_compiler(using=query.db).as_sql()
    except EmptyResultSet:
        return []
    with connections[query.db].cursor() as cursor:
        cursor.execute(sql, params)
        return represented_rows(columns, cursor.fetchall(), query.db)


def represented_rows(
    columns: tuple[str, ...], fetched: list[tuple[Any, ...]], alias: str
) -> list[dict[str, Any]]:
    """Rows of ``columns`` as a cursor of database ``alias`` returned them, as
    :func:`message_data` takes them.

    Every supported backend returns JSON as text (why ``JSONField.from_db_value``
    decodes it) and times as ``datetime`` (naive on SQLite, which stores UTC);
    the ORM's converters, a function call per value, took a third of a page.
    """
    connection = connections[alias]
    cost_field = Message._meta.get_field("cost")
    cost_column = cost_field.get_col(Message._meta.db_table)
    # The cost's exact decimal (SQLite stores a float) is the one value the
    # field's own converters make.
    cost_converters = [
        *connection.ops.get_db_converters(cost_column),
        *cost_field.get_db_converters(connection),
    ]
    loads = json.loads
    rows = []
    for values in fetched:
        row = dict(zip(columns, values, strict=True))
        for column in _JSONS:
            if row[column] is not None:
                row[column] = loads(row[column])
        for column in _UUIDS:
            row[column] = _uuid_text(row[column])
        for column in _TIMES:
            row[column] = _time_text(row[column])
        row["is_error"] = bool(row["is_error"])
        if row["cost"] is not None:
            for convert in cost_converters:
                row["cost"] = convert(row["cost"], cost_column, connection)
        rows.append(row)
    return rows


_JSONS = ("content_parts", "reasoning", "tool_calls", "parsed")
_UUIDS = ("id", "run_id")
_TIMES = ("created_at", "hidden_at")


def _uuid_text(value: uuid.UUID | str | None) -> str | None:
    """A UUID as the JSON writes it (SQLite returns the 32 hex digits)."""
    if value is None:
        return None
    if isinstance(value, str):
        return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"
    return str(value)


def _time_text(value: datetime | None) -> str | None:
    """A time as DRF's JSON encoder writes it (UTC as ``Z``); naive is UTC (SQLite)."""
    if value is None:
        return None
    text = value.isoformat()
    if value.tzinfo is None:
        return text + "Z"
    return text[:-6] + "Z" if text.endswith("+00:00") else text
