"""Content parts: the text, images and files one message carries.

A message whose content is plain text keeps a plain string; a message that
carries an image or a file holds a tuple of parts instead. Parts have two dict
forms, as messages do:

- the stored form names the attachment whose bytes it shows:
  ``{"type": "text", "text": ...}``, ``{"type": "image", "attachment_id": ...}``,
  ``{"type": "file", "attachment_id": ...}`` (never the bytes themselves);
- the wire form is the OpenAI content-part shape, built from the bytes once a
  service has loaded them (:attr:`AttachedPart.data`):
  ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``
  and ``{"type": "file", "file": {"filename": ..., "file_data": "data:...;base64,..."}}``.

Which roles may carry which parts is decided here, once (:func:`check_parts`).
This module imports nothing from Django and nothing from httpx.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Self

from llm_conversations.exceptions import InvalidMessage

__all__ = [
    "IMAGE_TYPES",
    "PART_ROLES",
    "SUPPORTED_TYPES",
    "AttachedPart",
    "ContentPart",
    "FilePart",
    "ImagePart",
    "TextPart",
    "attached",
    "check_parts",
    "describe_size",
    "part_from_dict",
    "parts_text",
]

# MIME types an image part may have; every other allowed type is a file part.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# Every type an attachment may have (ATTACHMENT_TYPES picks among them).
SUPPORTED_TYPES = IMAGE_TYPES | {"application/pdf"}

# The part types each role may carry (system and assistant turns: a string only).
PART_ROLES: dict[str, frozenset[str]] = {
    "user": frozenset({"text", "image", "file"}),
    "tool": frozenset({"text", "image"}),
}


@dataclass(frozen=True, slots=True)
class TextPart:
    """A piece of text within a message of several parts."""

    text: str
    type: ClassVar[str] = "text"

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text:
            raise InvalidMessage("invalid_part", "a text part needs non-empty text.", field="text")

    def to_stored(self) -> dict[str, Any]:
        """``{"type": "text", "text": ...}``."""
        return {"type": "text", "text": self.text}

    def to_wire(self) -> dict[str, Any]:
        """The same as the stored form."""
        return self.to_stored()


@dataclass(frozen=True, slots=True)
class AttachedPart:
    """An image or a file: a stored attachment, or bytes given inline.

    ``attachment_id`` names the stored attachment (the part's identity: two
    parts of the same attachment are equal). ``mime_type``, ``filename``,
    ``size``, ``width``, ``height`` and ``data`` (the bytes) are filled in by
    the service that loads the attachment before a provider call; a part built
    in code without storage gives ``data`` and ``mime_type`` instead of an id.
    """

    attachment_id: str | None = None
    mime_type: str = field(default="", compare=False)
    filename: str = field(default="", compare=False)
    size: int | None = field(default=None, compare=False)
    width: int | None = field(default=None, compare=False)
    height: int | None = field(default=None, compare=False)
    data: bytes | None = field(default=None, compare=False, repr=False)
    type: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if self.attachment_id is not None and (
            not isinstance(self.attachment_id, str) or not self.attachment_id
        ):
            raise InvalidMessage(
                "invalid_part",
                f"an {self.type} part's attachment_id must be a non-empty string.",
                field="attachment_id",
            )
        if self.data is not None and not isinstance(self.data, bytes):
            raise InvalidMessage("invalid_part", "part data must be bytes.", field="data")
        if self.attachment_id is None and (self.data is None or not self.mime_type):
            raise InvalidMessage(
                "missing_attachment",
                f"an {self.type} part needs an attachment_id, or data and a mime_type.",
                field="attachment_id",
            )
        if self.data is not None and self.size is None:
            object.__setattr__(self, "size", len(self.data))

    def with_data(self, **values: Any) -> Self:
        """The same part with loaded values (``data``, ``mime_type``, ...)."""
        return replace(self, **values)

    def to_stored(self) -> dict[str, Any]:
        """``{"type": ..., "attachment_id": ...}``: a reference, never the bytes."""
        return {"type": self.type, "attachment_id": self.attachment_id}

    def base64(self) -> str:
        """The bytes as base64 text (raises ``unresolved_attachment`` before they are loaded)."""
        if self.data is None:
            raise InvalidMessage(
                "unresolved_attachment",
                f"attachment {self.attachment_id} has not been loaded; "
                "load the conversation's attachments before sending it.",
                field="attachment_id",
            )
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        """``data:<mime type>;base64,<bytes>``."""
        return f"data:{self.mime_type};base64,{self.base64()}"

    def describe(self) -> str:
        """What a person needs to know: ``image/png 64x64, 1.2 KB``."""
        label = self.mime_type or self.type
        if self.width and self.height:
            label += f" {self.width}x{self.height}"
        if self.size is not None:
            label += f", {describe_size(self.size)}"
        return label


@dataclass(frozen=True, slots=True)
class ImagePart(AttachedPart):
    """An image (PNG, JPEG, GIF or WEBP)."""

    type: ClassVar[str] = "image"

    def to_wire(self) -> dict[str, Any]:
        """``{"type": "image_url", "image_url": {"url": <data URL>}}``."""
        return {"type": "image_url", "image_url": {"url": self.data_url()}}


@dataclass(frozen=True, slots=True)
class FilePart(AttachedPart):
    """A document (a PDF)."""

    type: ClassVar[str] = "file"

    def to_wire(self) -> dict[str, Any]:
        """``{"type": "file", "file": {"filename", "file_data": <data URL>}}``."""
        return {
            "type": "file",
            "file": {"filename": self.filename or "file", "file_data": self.data_url()},
        }


ContentPart = TextPart | ImagePart | FilePart
"""One part of a message's content."""


def describe_size(size: int) -> str:
    """Bytes for people: ``512 B``, ``1.2 KB``, ``3.4 MB``."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _data_url(url: object, field_name: str) -> tuple[str, bytes]:
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        raise InvalidMessage(
            "unsupported_content",
            "only data URLs (data:<type>;base64,...) or stored attachments can be sent.",
            field=field_name,
        )
    header, _, encoded = url.partition(";base64,")
    try:
        return header[5:], base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidMessage(
            "invalid_part", "the data URL is not valid base64.", field=field_name
        ) from None


def part_from_dict(data: object) -> ContentPart:
    """Read a part in either form (stored or wire) into a validated part."""
    if isinstance(data, TextPart | ImagePart | FilePart):
        return data
    if not isinstance(data, Mapping):
        raise InvalidMessage("invalid_part", "a content part must be an object.")
    kind = data.get("type")
    if kind == "text":
        return TextPart(data.get("text"))  # type: ignore[arg-type]
    if kind in ("image", "file") and "attachment_id" in data:
        cls = ImagePart if kind == "image" else FilePart
        return cls(attachment_id=data["attachment_id"])
    if kind == "image_url" and isinstance(data.get("image_url"), Mapping):
        mime_type, raw = _data_url(data["image_url"].get("url"), "image_url.url")
        return ImagePart(mime_type=mime_type, data=raw)
    if kind == "file" and isinstance(data.get("file"), Mapping):
        file = data["file"]
        mime_type, raw = _data_url(file.get("file_data"), "file.file_data")
        return FilePart(mime_type=mime_type, filename=str(file.get("filename") or ""), data=raw)
    raise InvalidMessage(
        "invalid_part",
        f"unknown content part {kind!r}; expected text, image or file.",
        field="type",
    )


def check_parts(role: str, parts: Iterable[object]) -> tuple[ContentPart, ...]:
    """Read ``parts`` for a message of ``role``: at least one, each allowed for the role.

    Errors name the part's index (``content[1]``).
    """
    allowed = PART_ROLES.get(role)
    if allowed is None:
        raise InvalidMessage(
            "content_part_not_allowed",
            f"{role} message content must be text, not a list of parts.",
            field="content",
        )
    result: list[ContentPart] = []
    for index, raw in enumerate(parts):
        try:
            part = part_from_dict(raw)
        except InvalidMessage as exc:
            raise exc.within(f"content[{index}]") from None
        if part.type not in allowed:
            raise InvalidMessage(
                "content_part_not_allowed",
                f"a {role} message cannot carry {part.type} parts.",
                field=f"content[{index}]",
            )
        result.append(part)
    if not result:
        raise InvalidMessage(
            "missing_content", f"{role} message content must not be an empty list.", field="content"
        )
    return tuple(result)


def parts_text(parts: Iterable[ContentPart]) -> str:
    """The text of the text parts, one paragraph each (what search and titles read)."""
    return "\n\n".join(part.text for part in parts if isinstance(part, TextPart))


def attached(parts: Iterable[ContentPart] | None) -> list[AttachedPart]:
    """The image and file parts among ``parts``."""
    return [part for part in parts or () if isinstance(part, AttachedPart)]
