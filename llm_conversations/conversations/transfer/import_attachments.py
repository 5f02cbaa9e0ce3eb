"""The attachments an import carries, stored through the attachment store.

An import brings files two ways: our own export written with inline
attachments (``data``: the bytes as base64 beside each reference), and the
images and files other tools' formats give as data URLs. Either way the bytes
pass the checks of every upload (:func:`~llm_conversations.conversations.attachments.create_attachment`:
size, type detected from the bytes, image and PDF rules) and are stored for
the conversation's owner, and the messages then name the stored attachment.
Run inside the conversation's transaction: a refused conversation leaves no
rows, and :func:`discard_files` removes the files it wrote.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from llm_conversations.conversations.attachments import create_attachment
from llm_conversations.conversations.transfer.import_shapes import invalid, uuid_value
from llm_conversations.core.content_parts import ContentPart, FilePart, ImagePart, attached
from llm_conversations.core.messages import ChatMessage
from llm_conversations.exceptions import LLMConversationsError
from llm_conversations.models import Attachment
from llm_conversations.users import User

__all__ = ["InlineFile", "discard_files", "inline_file", "store_attachments"]


@dataclass(frozen=True, slots=True)
class InlineFile:
    """The bytes of an exported attachment, with what the export said of them."""

    data: bytes
    filename: str
    mime_type: str


def inline_file(item: Mapping[str, Any], field: str) -> InlineFile | None:
    """The file an export's attachment item carries, ``None`` for a reference only.

    Its bytes must be base64 whose size and SHA-256 are the item's.
    """
    encoded = item.get("data")
    if encoded is None:
        return None
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise invalid(f"{field}.data", "must be base64 text or null") from None
    if len(data) != item["size"] or hashlib.sha256(data).hexdigest() != item["sha256"]:
        raise invalid(f"{field}.data", "must be the bytes the size and sha256 describe")
    return InlineFile(data, str(item["filename"] or ""), str(item["mime_type"] or ""))


def store_attachments(
    owner: User | None, messages: Sequence[ChatMessage], inline: Mapping[str, InlineFile]
) -> tuple[list[ChatMessage], list[Attachment]]:
    """``messages`` with every part naming a stored attachment, and the attachments created.

    A part given as bytes is stored as a new upload of ``owner``; a part
    naming an id of ``inline`` is stored under that id unless an attachment
    has it already. The same bytes already stored for ``owner`` are reused
    (their id then replaces the part's). Raises the attachment store's
    :class:`~llm_conversations.exceptions.InvalidAttachment`, naming the part.
    """
    created: list[Attachment] = []
    stored: dict[str, str] = {}
    result = []
    for index, message in enumerate(messages):
        if not attached(message.parts):
            result.append(message)
            continue
        parts: list[ContentPart] = []
        for part_index, part in enumerate(message.parts or ()):
            if isinstance(part, ImagePart | FilePart):
                try:
                    part = _stored_part(owner, part, inline, stored, created)
                except LLMConversationsError as exc:
                    discard_files(created)
                    raise exc.within(f"messages[{index}].content[{part_index}]") from None
            parts.append(part)
        result.append(replace(message, parts=tuple(parts)))
    return result, created


def _stored_part(
    owner: User | None,
    part: ImagePart | FilePart,
    inline: Mapping[str, InlineFile],
    stored: dict[str, str],
    created: list[Attachment],
) -> ImagePart | FilePart:
    if part.attachment_id is not None:
        file = inline.get(part.attachment_id)
        if file is None:
            return part  # a reference: the store checks it exists for the owner
        if part.attachment_id not in stored:
            if Attachment.objects.filter(pk=part.attachment_id).exists():
                stored[part.attachment_id] = part.attachment_id
            else:
                attachment_id = uuid_value(part.attachment_id, "attachment_id")
                stored[part.attachment_id] = _create(owner, file, attachment_id, created)
        new_id = stored[part.attachment_id]
    else:
        assert part.data is not None  # a part without an id carries its bytes
        new_id = _create(owner, InlineFile(part.data, part.filename, part.mime_type), None, created)
    return type(part)(attachment_id=new_id)


def _create(
    owner: User | None, file: InlineFile, attachment_id: uuid.UUID | None, created: list[Attachment]
) -> str:
    attachment, new = create_attachment(
        owner,
        file.data,
        filename=file.filename,
        declared_type=file.mime_type,
        attachment_id=attachment_id,
    )
    if new:
        created.append(attachment)
    return str(attachment.pk)


def discard_files(attachments: Sequence[Attachment]) -> None:
    """Delete the files of attachments whose rows a refused import rolls back."""
    for attachment in attachments:
        attachment.file.delete(save=False)
