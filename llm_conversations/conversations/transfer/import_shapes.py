"""The shape of a line of the full-fidelity export form, and reading its values.

Each reader checks one value and raises :class:`InvalidImport` naming its
field (``messages[3].created_at``); :mod:`llm_conversations.conversations.transfer.importing`
builds rows from what they return.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from django.core.exceptions import ValidationError

from llm_conversations.core.content_parts import attached
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.text import json_problem
from llm_conversations.exceptions import InvalidImport, LLMConversationsError

__all__ = [
    "CONVERSATION_KEYS",
    "FEEDBACK_KEYS",
    "MESSAGE_KEYS",
    "MESSAGE_KEYS_V1",
    "MESSAGE_KEYS_V2",
    "MESSAGE_KEYS_V3",
    "READ_VERSIONS",
    "RUN_KEYS",
    "USAGE_KEYS",
    "check_attachment_list",
    "check_storable_value",
    "clean_row",
    "decimal_value",
    "invalid",
    "list_value",
    "moment",
    "object_value",
    "optional_moment",
    "usage_value",
    "uuid_value",
    "within",
]

_T = TypeVar("_T")

CONVERSATION_KEYS = (
    "format",
    "version",
    "id",
    "owner",
    "title",
    "title_source",
    "metadata",
    "forked_from",
    "forked_at_position",
    "created_at",
    "updated_at",
    "runs",
    "messages",
)
RUN_KEYS = (
    "id",
    "status",
    "termination_reason",
    "provider",
    "model",
    "instructions",
    "parameters",
    "tools",
    "max_iterations",
    "iterations",
    "usage",
    "cost",
    "error_type",
    "error_message",
    "pending_tool_calls",
    "decisions",
    "attempts",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
)
MESSAGE_KEYS_V1 = (
    "id",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "is_error",
    "run",
    "provider",
    "model",
    "finish_reason",
    "usage",
    "cost",
    "parsed",
    "metadata",
    "created_at",
    "feedback",
)
# Version 2 adds the attachments each message shows, version 3 the reasoning
# state of assistant turns, version 5 whether it is hidden from the model;
# lines of earlier versions are read too.
MESSAGE_KEYS_V2 = (*MESSAGE_KEYS_V1, "attachments")
MESSAGE_KEYS_V3 = (*MESSAGE_KEYS_V2, "reasoning")
MESSAGE_KEYS = (*MESSAGE_KEYS_V3, "hidden_at", "hidden_reason")
READ_VERSIONS = (1, 2, 3, 4, 5)
# Version 4 adds "data" to each attachment: its bytes as base64, or null.
ATTACHMENT_KEYS_V2 = ("id", "filename", "mime_type", "size", "sha256")
ATTACHMENT_KEYS = (*ATTACHMENT_KEYS_V2, "data")
FEEDBACK_KEYS = ("user", "rating", "comment", "created_at", "updated_at")
USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens", "cached_tokens")


def invalid(field: str, why: str) -> InvalidImport:
    """An ``invalid_import`` error naming ``field``."""
    return InvalidImport("invalid_import", f"{field} {why}.", field=field)


def object_value(value: Any, field: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    """``value`` as an object with exactly ``keys``."""
    if not isinstance(value, dict):
        raise invalid(field or "a line", "must be a JSON object")
    missing = [key for key in keys if key not in value]
    unknown = sorted(set(value) - set(keys))
    if missing or unknown:
        raise invalid(
            field or "a line",
            f"has missing keys ({', '.join(missing) or 'none'}) "
            f"or unknown keys ({', '.join(unknown) or 'none'})",
        )
    return value


def check_attachment_list(
    message: ChatMessage, value: Any, field: str, *, version: int
) -> list[Mapping[str, Any]]:
    """``value``: the references of exactly the attachments ``message`` shows.

    An item without ``data`` names a file that must be in this site's storage
    already (the store checks each id and its owner when the history is
    inserted); one with ``data`` (version 4) carries its bytes.
    """
    keys = ATTACHMENT_KEYS if version >= 4 else ATTACHMENT_KEYS_V2
    items = [
        object_value(item, f"{field}[{index}]", keys)
        for index, item in enumerate(list_value(value, field))
    ]
    shown = {part.attachment_id for part in attached(message.parts)}
    if {str(item["id"]) for item in items} != shown or len(items) != len(shown):
        raise invalid(field, "must list exactly the attachments the message's content shows")
    return items


def list_value(value: Any, field: str) -> list[Any]:
    """``value`` as a list."""
    if not isinstance(value, list):
        raise invalid(field, "must be a list")
    return value


def uuid_value(value: Any, field: str) -> uuid.UUID:
    """``value`` as a UUID."""
    try:
        return uuid.UUID(value)
    except (TypeError, ValueError, AttributeError):
        raise invalid(field, "must be a UUID") from None


def optional_moment(value: Any, field: str) -> datetime | None:
    """``value`` as an aware date and time, or ``None``."""
    return None if value is None else moment(value, field)


def moment(value: Any, field: str) -> datetime:
    """``value`` as an aware date and time (ISO 8601)."""
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise invalid(field, "must be an ISO 8601 date and time") from None
    if moment.tzinfo is None:
        raise invalid(field, "must carry a time zone")
    return moment


def usage_value(value: Any, field: str, *, null: bool) -> dict[str, Any]:
    """``value`` as the four token counts (all ``None`` for ``null`` when ``null``)."""
    if value is None and null:
        return dict.fromkeys(USAGE_KEYS)
    return dict(object_value(value, field, USAGE_KEYS))


def decimal_value(value: Any, field: str) -> Decimal:
    """``value``, exact decimal text (a cost), as a ``Decimal``."""
    if not isinstance(value, str):
        raise invalid(field, "must be a decimal number as text")
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise invalid(field, "must be a decimal number as text") from None
    if not number.is_finite():
        raise invalid(field, "must be a finite decimal number")
    return number


def clean_row(row: Any, field: str, exclude: list[str]) -> None:
    """The row's field rules (types, choices, lengths), without a query."""
    try:
        row.clean_fields(exclude=exclude)
        row.clean()
    except ValidationError as exc:
        name, errors = next(iter(exc.message_dict.items()))
        where = field if name == "__all__" else f"{field}.{name}"
        raise invalid(where, f"is invalid: {' '.join(errors)}") from None


def check_storable_value(value: Any, field: str) -> None:
    """Refuse text and JSON no supported database stores (:func:`json_problem`)."""
    problem = json_problem(value, field)
    if problem is not None:
        raise InvalidImport(problem.code, f"{problem.why} cannot be stored.", field=problem.path)


def within(field: str, read: Callable[..., _T], *args: Any) -> _T:
    """``read(*args)``, its value-object errors named from ``field``."""
    try:
        return read(*args)
    except LLMConversationsError as exc:
        raise exc.within(field) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise invalid(field, f"is invalid ({type(exc).__name__}: {exc})") from None
