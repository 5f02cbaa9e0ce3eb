"""Exporting conversations: the fine-tuning form and the full-fidelity form.

Both are JSON Lines, one conversation per line, written by streaming: the
conversations are read with ``.iterator(chunk_size=...)`` and their messages,
runs and feedback are prefetched once per chunk, so memory stays constant
whatever the number of conversations and the queries grow with the chunks,
never with the rows.

- :func:`finetune_records`: ``{"messages": [...], "tools": [...]}``, the
  OpenAI chat fine-tuning form: messages in the wire form
  (``ChatMessage.to_wire()``, tool calls included) up to the last final answer,
  and the tools the conversation's runs offered (``ToolSpec.to_wire()``).
- :func:`full_records`: every stored field (see :data:`FORMAT` and
  docs/data.md), read back by :mod:`llm_conversations.conversations.transfer.importing`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from itertools import islice
from typing import IO, Any

from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.db.models import Exists, OuterRef, QuerySet

from llm_conversations.conversations.history import stored_message
from llm_conversations.core.messages import Role
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.models import (
    MESSAGE_COLUMNS,
    Conversation,
    Feedback,
    Message,
    MessageAttachment,
    Rating,
    Run,
)
from llm_conversations.users import User

__all__ = [
    "CHUNK_SIZE",
    "FORMAT",
    "FORMAT_VERSION",
    "Attachments",
    "FeedbackSelection",
    "FinetuneExport",
    "dumps",
    "finetune_records",
    "full_records",
    "select_conversations",
    "timestamp",
    "write_lines",
]

# The "format" and "version" of every full-fidelity line.
FORMAT = "llm_conversations.conversation"
# Version 2 adds "attachments" to every message, version 3 "reasoning", version 4
# "data" to every attachment, version 5 "hidden_at" and "hidden_reason" to every
# message (earlier versions are still read).
FORMAT_VERSION = 5
# Conversations read (and their rows prefetched) at a time.
CHUNK_SIZE = 100

_USAGE = ("input_tokens", "output_tokens", "total_tokens", "cached_tokens")


class Attachments(StrEnum):
    """How a full export carries the attachments its messages show."""

    REFERENCE = "reference"  # id, name, type, size and hash; the bytes stay in the storage
    INLINE = "inline"  # the same, and the bytes as base64, so the line imports anywhere


class FeedbackSelection(StrEnum):
    """Which rated conversations to keep."""

    POSITIVE = "positive"  # some answer rated +1, none rated -1
    NEGATIVE = "negative"  # some answer rated -1
    ANY = "any"  # some answer rated


def select_conversations(
    *,
    owners: Iterable[User] = (),
    since: datetime | None = None,
    until: datetime | None = None,
    feedback: FeedbackSelection | None = None,
) -> QuerySet[Conversation]:
    """Conversations of ``owners`` (all when empty), created in ``[since, until)``,
    rated as ``feedback`` asks, oldest first."""
    conversations = Conversation.objects.all()
    owners = list(owners)
    if owners:
        conversations = conversations.filter(owner__in=owners)
    if since is not None:
        conversations = conversations.filter(created_at__gte=since)
    if until is not None:
        conversations = conversations.filter(created_at__lt=until)
    if feedback is not None:
        rated = Feedback.objects.filter(message__conversation_id=OuterRef("pk"))
        up = Exists(rated.filter(rating=Rating.UP))
        down = Exists(rated.filter(rating=Rating.DOWN))
        if feedback is FeedbackSelection.POSITIVE:
            conversations = conversations.filter(up).exclude(down)
        elif feedback is FeedbackSelection.NEGATIVE:
            conversations = conversations.filter(down)
        else:
            conversations = conversations.filter(Exists(rated))
    return conversations.order_by("created_at", "id")


# The message columns an export reads, as plain values (no model instances).
_MESSAGE_COLUMNS = (
    "id",
    "conversation_id",
    *MESSAGE_COLUMNS,
    "run_id",
    "provider",
    "model",
    "finish_reason",
    *_USAGE,
    "parsed",
    "cost",
    "metadata",
    "hidden_at",
    "hidden_reason",
    "created_at",
)


@dataclass
class _Loaded:
    """One conversation with its rows, read for a whole chunk at once."""

    conversation: Conversation
    runs: list[Run] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    # By message id: the attachments each message shows (full exports only).
    attachments: dict[Any, list[dict[str, Any]]] = field(default_factory=dict)


def _streamed(
    conversations: QuerySet[Conversation],
    chunk_size: int,
    *,
    feedback: bool,
    attachments: Attachments = Attachments.REFERENCE,
) -> Iterator[tuple[_Loaded, dict[Any, list[dict[str, Any]]]]]:
    """Each conversation with its runs and messages (and the chunk's feedback by
    message id, and the attachments its messages show): the conversations'
    query, then two queries a chunk, four with ``feedback`` (full exports);
    inline ``attachments`` add one storage read per attachment a chunk shows."""
    rows = conversations.select_related("owner").iterator(chunk_size=chunk_size)
    while chunk := list(islice(rows, chunk_size)):
        loaded = {c.pk: _Loaded(c) for c in chunk}
        for run in Run.objects.filter(conversation_id__in=loaded).order_by("created_at", "id"):
            loaded[run.conversation_id].runs.append(run)
        messages = Message.objects.filter(conversation_id__in=loaded).order_by(
            "conversation_id", "position"
        )
        for message in messages.values(*_MESSAGE_COLUMNS):
            loaded[message["conversation_id"]].messages.append(message)
        ratings: dict[Any, list[dict[str, Any]]] = {}
        if feedback:
            read = _inline_reader() if attachments is Attachments.INLINE else None
            for link in (
                MessageAttachment.objects.filter(message__conversation_id__in=loaded)
                .order_by("message_id", "attachment_id")
                .values(
                    "message__conversation_id",
                    "message_id",
                    "attachment__file",
                    *_ATTACHMENT_COLUMNS,
                )
            ):
                shown = loaded[link["message__conversation_id"]].attachments
                shown.setdefault(link["message_id"], []).append(
                    {key: link[column] for key, column in _ATTACHMENT_KEYS.items()}
                    | {"data": None if read is None else read(link["attachment__file"])}
                )
            username = f"user__{get_user_model().USERNAME_FIELD}"
            for rating in (
                Feedback.objects.filter(message__conversation_id__in=loaded)
                .order_by("message_id", username, "id")
                .values("message_id", username, "rating", "comment", "created_at", "updated_at")
            ):
                ratings.setdefault(rating["message_id"], []).append(
                    {
                        "user": rating[username],
                        "rating": rating["rating"],
                        "comment": rating["comment"],
                        "created_at": timestamp(rating["created_at"]),
                        "updated_at": timestamp(rating["updated_at"]),
                    }
                )
        for item in loaded.values():
            yield item, ratings


def timestamp(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with microseconds, the one form every export writes."""
    return None if moment is None else moment.astimezone(UTC).isoformat(timespec="microseconds")


def decimal_text(value: Decimal | None) -> str | None:
    """A decimal as exact text (a cost), or ``None``."""
    return None if value is None else str(value)


def _usage(values: Mapping[str, Any]) -> dict[str, int | None]:
    return {name: values[name] for name in _USAGE}


def _run_record(run: Run) -> dict[str, Any]:
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
        "usage": {name: getattr(run, name) for name in _USAGE},
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


def _inline_reader() -> Callable[[str], str]:
    """Reads a stored file as base64 text, each file once (a chunk's forks show the same)."""
    read: dict[str, str] = {}

    def inline(name: str) -> str:
        if name not in read:
            with default_storage.open(name, "rb") as handle:
                read[name] = base64.b64encode(handle.read()).decode("ascii")
        return read[name]

    return inline


# What an export says of each attachment a message shows: a reference, and
# with Attachments.INLINE the bytes as base64 in "data" (docs/data.md).
_ATTACHMENT_KEYS = {
    "id": "attachment_id",
    "filename": "attachment__filename",
    "mime_type": "attachment__mime_type",
    "size": "attachment__size",
    "sha256": "attachment__sha256",
}
_ATTACHMENT_COLUMNS = tuple(_ATTACHMENT_KEYS.values())


def _message_record(
    row: Mapping[str, Any],
    feedback: list[dict[str, Any]],
    attachments: list[dict[str, Any]],
) -> dict[str, Any]:
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


def _full_record(loaded: _Loaded, ratings: Mapping[Any, list[dict[str, Any]]]) -> dict[str, Any]:
    conversation = loaded.conversation
    owner = conversation.owner
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "id": str(conversation.pk),
        "owner": None if owner is None else str(owner.get_username()),
        "title": conversation.title,
        "title_source": conversation.title_source,
        "metadata": conversation.metadata,
        "forked_from": None
        if conversation.forked_from_id is None
        else str(conversation.forked_from_id),
        "forked_at_position": conversation.forked_at_position,
        "created_at": timestamp(conversation.created_at),
        "updated_at": timestamp(conversation.updated_at),
        "runs": [_run_record(run) for run in loaded.runs],
        "messages": [
            _message_record(row, ratings.get(row["id"], []), loaded.attachments.get(row["id"], []))
            for row in loaded.messages
        ],
    }


def full_records(
    conversations: QuerySet[Conversation],
    *,
    chunk_size: int = CHUNK_SIZE,
    attachments: Attachments = Attachments.REFERENCE,
) -> Iterator[dict[str, Any]]:
    """The full-fidelity form of each conversation, streamed; ``attachments``
    inline carries their bytes too, so the lines import into any database."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    for loaded, ratings in _streamed(
        conversations, chunk_size, feedback=True, attachments=Attachments(attachments)
    ):
        yield _full_record(loaded, ratings)


@dataclass
class FinetuneExport:
    """:func:`finetune_records` counts what it left out as it goes."""

    skipped: int = 0

    def records(
        self, conversations: QuerySet[Conversation], *, chunk_size: int = CHUNK_SIZE
    ) -> Iterator[dict[str, Any]]:
        """The fine-tuning form of each conversation that has one, streamed."""
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        for loaded, _ in _streamed(conversations, chunk_size, feedback=False):
            record = _finetune_record(loaded)
            if record is None:
                self.skipped += 1
            else:
                yield record


def finetune_records(
    conversations: QuerySet[Conversation], *, chunk_size: int = CHUNK_SIZE
) -> Iterator[dict[str, Any]]:
    """:meth:`FinetuneExport.records` without the count."""
    return FinetuneExport().records(conversations, chunk_size=chunk_size)


def _finetune_record(loaded: _Loaded) -> dict[str, Any] | None:
    """Messages up to the last final answer, with the tools offered; ``None`` when
    there is no final answer, a call names a tool no run offered, or a message
    shows an attachment. Hidden messages are left out, as from what the model
    sees (a tool group is hidden whole)."""
    chat = [stored_message(row) for row in loaded.messages if row["hidden_at"] is None]
    if any(message.parts is not None for message in chat):
        return None  # the fine-tuning form would need the bytes inline
    ends = [i for i, m in enumerate(chat) if m.role is Role.ASSISTANT and not m.tool_calls]
    if not ends:
        return None
    chat = chat[: ends[-1] + 1]
    tools: dict[str, ToolSpec] = {}
    for run in loaded.runs:
        for spec in run.offered_tools:
            tools.setdefault(spec.name, spec)
    called = {call.name for m in chat for call in m.tool_calls or ()}
    # The store saw every call answered before the final answer that ends ``chat``.
    if not called <= tools.keys():
        return None
    return {
        "messages": [m.to_wire() for m in chat],
        "tools": [spec.to_wire() for spec in tools.values()],
    }


def dumps(record: dict[str, Any]) -> str:
    """One JSON line: compact, UTF-8 text as is, keys in the order written."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def write_lines(records: Iterable[dict[str, Any]], stream: IO[str]) -> int:
    """Write each record as one line of ``stream``; returns how many."""
    count = 0
    for record in records:
        stream.write(dumps(record) + "\n")
        count += 1
    return count
