"""Attachments: storing uploads, the references of messages, and loading their
bytes for providers.

An upload is checked whole before anything is written
(:func:`~llm_conversations.conversations.uploads.inspect_upload`). One
owner uploading the same bytes twice gets the first attachment back.

Messages refer to attachments by id; :func:`check_references` (the store
calls it before an append) makes sure each one exists, belongs to the
conversation's owner and is of the part's kind, and :func:`link_attachments`
indexes the references. :func:`load_attachment_data` fills in the bytes just
before a provider call; nothing else reads them.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.http import FileResponse
from django.utils import timezone

from llm_conversations.conf import conf
from llm_conversations.conversations.uploads import inspect_upload
from llm_conversations.core.content_parts import IMAGE_TYPES, AttachedPart, ImagePart, attached
from llm_conversations.core.messages import ChatMessage
from llm_conversations.exceptions import InvalidAttachment, InvalidMessage
from llm_conversations.models import Attachment, Conversation, Message, MessageAttachment
from llm_conversations.users import User

__all__ = [
    "check_references",
    "create_attachment",
    "delete_file_on_commit",
    "file_response",
    "link_attachments",
    "load_attachment_data",
    "orphan_cutoff",
    "orphaned_attachments",
    "purge_orphaned_attachments",
]


def create_attachment(
    owner: User | None,
    data: bytes,
    *,
    filename: str = "",
    declared_type: str | None = None,
    attachment_id: uuid.UUID | None = None,
) -> tuple[Attachment, bool]:
    """Check and store an upload; ``(attachment, created)``.

    The same bytes uploaded again by the same owner answer the first
    attachment (``created`` is ``False``). Nothing is written when the upload
    is refused. ``attachment_id`` keeps the id an import read (a new one otherwise).
    """
    info = inspect_upload(data, declared_type)
    digest = hashlib.sha256(data).hexdigest()
    owned = Attachment.objects.filter(owner=owner) if owner else Attachment.objects.none()
    existing = owned.filter(sha256=digest).first()
    if existing is not None:
        return existing, False
    attachment = Attachment(
        id=attachment_id or uuid.uuid4(),
        owner=owner,
        filename=filename[:255],
        mime_type=info.mime_type,
        size=len(data),
        sha256=digest,
        width=info.width,
        height=info.height,
        pages=info.pages,
    )
    attachment.file.save(str(attachment.pk), ContentFile(data), save=False)
    try:
        with transaction.atomic():
            attachment.save(force_insert=True)
    except IntegrityError:
        # The same bytes, uploaded by the same owner at the same moment.
        attachment.file.delete(save=False)
        return owned.get(sha256=digest), False
    except BaseException:
        attachment.file.delete(save=False)
        raise
    return attachment, True


# Messages -------------------------------------------------------------------


def check_references(conversation_id: uuid.UUID, messages: Sequence[ChatMessage]) -> None:
    """Refuse parts naming no attachment of the conversation's owner, or of another kind.

    Raises :class:`InvalidMessage`: ``unknown_attachment``,
    ``attachment_kind_mismatch``, or ``missing_attachment`` for parts given
    as inline bytes, which cannot be stored (upload them first). One query when any message has attachments, none otherwise.
    """
    wanted: dict[str, tuple[int, int, AttachedPart]] = {}
    for index, message in enumerate(messages):
        for part_index, part in enumerate(message.parts or ()):
            if not isinstance(part, AttachedPart):
                continue
            if part.attachment_id is None:
                raise InvalidMessage(
                    "missing_attachment",
                    "an image or file is stored by attachment_id; upload it first.",
                    field=f"messages[{index}].content[{part_index}].attachment_id",
                )
            wanted.setdefault(part.attachment_id, (index, part_index, part))
    if not wanted:
        return
    owner = Conversation.objects.filter(pk=conversation_id).values("owner_id")[:1]
    rows = (
        Attachment.objects.filter(pk__in=_valid_ids(wanted))
        .annotate(conversation_owner=Subquery(owner))
        .values_list("pk", "mime_type", "owner_id", "conversation_owner")
    )
    # Equal owners, None included: a conversation without an owner shows
    # attachments without one.
    found = {pk: mime_type for pk, mime_type, mine, theirs in rows if mine == theirs}
    found_text = {str(pk): mime_type for pk, mime_type in found.items()}
    for attachment_id, (index, part_index, ref) in wanted.items():
        where = f"messages[{index}].content[{part_index}].attachment_id"
        mime_type = found_text.get(attachment_id)
        if mime_type is None:
            raise InvalidMessage(
                "unknown_attachment", f"no attachment {attachment_id} of yours.", field=where
            )
        if isinstance(ref, ImagePart) != (mime_type in IMAGE_TYPES):
            raise InvalidMessage(
                "attachment_kind_mismatch",
                f"attachment {attachment_id} is {mime_type}; "
                f"use an {'image' if mime_type in IMAGE_TYPES else 'file'} part for it.",
                field=where,
            )


def _valid_ids(ids: Iterable[str]) -> list[uuid.UUID]:
    result = []
    for text in ids:
        try:
            result.append(uuid.UUID(text))
        except ValueError:
            continue
    return result


def link_attachments(rows: Iterable[Message]) -> None:
    """Index the attachments the stored ``rows`` show (one ``INSERT``, none without parts)."""
    links = [
        MessageAttachment(message_id=row.pk, attachment_id=part["attachment_id"], kind=part["type"])
        for row in rows
        if row.content_parts
        for part in _unique_attached(row.content_parts)
    ]
    if links:
        MessageAttachment.objects.bulk_create(links)


def _unique_attached(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for part in parts:
        if part.get("type") in ("image", "file"):
            seen.setdefault(str(part["attachment_id"]), part)
    return list(seen.values())


def load_attachment_data(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``messages`` with the bytes and details of every attachment they show filled in.

    One query for all the attachments, one storage read per attachment;
    messages without attachments are passed through as they are.
    """
    wanted = {
        part.attachment_id
        for message in messages
        for part in attached(message.parts)
        if part.data is None and part.attachment_id is not None
    }
    if not wanted:
        return list(messages)
    rows = {str(row.pk): row for row in Attachment.objects.filter(pk__in=_valid_ids(wanted))}
    loaded: dict[str, dict[str, Any]] = {}
    for attachment_id in wanted:
        row = rows.get(attachment_id)
        if row is None:
            raise InvalidAttachment(
                "unknown_attachment", f"attachment {attachment_id} no longer exists."
            )
        with row.file.open("rb") as handle:
            data = handle.read()
        loaded[attachment_id] = {
            "data": data,
            "mime_type": row.mime_type,
            "filename": row.filename,
            "size": row.size,
            "width": row.width,
            "height": row.height,
        }
    result = []
    for message in messages:
        if not attached(message.parts):
            result.append(message)
            continue
        parts = tuple(
            part.with_data(**loaded[part.attachment_id])
            if isinstance(part, AttachedPart) and part.attachment_id in loaded
            else part
            for part in message.parts or ()
        )
        result.append(replace(message, parts=parts))
    return result


# Retention ------------------------------------------------------------------


def file_response(attachment: Attachment) -> FileResponse:
    """The bytes of an attachment as a response, to its owner (API) or to staff (admin).

    Images are shown inline, other files downloaded; ``nosniff`` keeps a
    browser to the detected type.
    """
    response = FileResponse(
        attachment.file.open("rb"),
        content_type=attachment.mime_type,
        as_attachment=not attachment.is_image,
        filename=attachment.filename or str(attachment.pk),
    )
    response["X-Content-Type-Options"] = "nosniff"
    return response


def orphan_cutoff(now: datetime | None = None, hours: int | None = None) -> datetime | None:
    """The moment before which an attachment no message shows may go
    (``ORPHAN_ATTACHMENT_HOURS`` ago), or ``None`` when they are kept forever."""
    keep = conf.ORPHAN_ATTACHMENT_HOURS if hours is None else hours
    if keep is None:
        return None
    return (now or timezone.now()) - timedelta(hours=keep)


def orphaned_attachments(older_than: datetime) -> QuerySet[Attachment]:
    """Attachments uploaded before ``older_than`` that no message shows."""
    shown = MessageAttachment.objects.filter(attachment_id=OuterRef("pk"))
    return Attachment.objects.filter(created_at__lt=older_than).exclude(Exists(shown))


def delete_file_on_commit(sender: Any, instance: Attachment, **kwargs: Any) -> None:
    """``post_delete`` receiver: an attachment's file goes once its row's deletion commits.

    Every way a row goes (a purge, a user deleted with their attachments, the
    admin) takes its file with it; a rolled-back deletion keeps both.
    """
    name = instance.file.name
    if name:
        storage = instance.file.storage
        transaction.on_commit(lambda: storage.delete(name))


def purge_orphaned_attachments(older_than: datetime | None = None, *, batch_size: int = 100) -> int:
    """Delete :func:`orphaned_attachments` and their files; how many were deleted.

    Each batch is one short transaction that re-checks that no message shows
    the rows (``PROTECT`` refuses otherwise); the files go when it commits
    (:func:`delete_file_on_commit`).
    """
    cutoff = orphan_cutoff() if older_than is None else older_than
    if cutoff is None:
        return 0
    deleted = 0
    while True:
        batch = list(
            orphaned_attachments(cutoff).order_by("pk").values_list("pk", flat=True)[:batch_size]
        )
        if not batch:
            return deleted
        with transaction.atomic():
            count, _ = orphaned_attachments(cutoff).filter(pk__in=batch).delete()
        deleted += count
        if len(batch) < batch_size:
            return deleted
