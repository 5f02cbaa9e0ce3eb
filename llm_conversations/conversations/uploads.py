"""Checking an upload's bytes before anything is written.

Its size (``ATTACHMENT_MAX_BYTES``), its type detected from the bytes (magic
numbers; a declared type that disagrees is refused), and its content: an image
must decode within ``ATTACHMENT_MAX_PIXELS`` (checked from the header before
any pixel is decompressed, so a decompression bomb costs nothing), a PDF must
have its header and end marker and at most ``ATTACHMENT_MAX_PDF_PAGES`` pages.
"""

from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass

from llm_conversations.conf import conf
from llm_conversations.conversations.png import png_is_whole
from llm_conversations.core.content_parts import IMAGE_TYPES
from llm_conversations.exceptions import InvalidAttachment

__all__ = ["AttachmentInfo", "detect_type", "inspect_upload"]

# The first bytes of each supported type (WEBP: "RIFF", a size, then "WEBP").
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
)
# What clients declare that means "not said".
_UNDECLARED = frozenset({"", "application/octet-stream"})
_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg"}
# Pillow's name of each image type.
_PIL_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP"}
# A page object, not the page tree ("/Type /Pages").
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")


def detect_type(data: bytes) -> str | None:
    """The MIME type the bytes' magic number names, or ``None``."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    for magic, mime_type in _MAGIC:
        if data.startswith(magic):
            return mime_type
    return None


@dataclass(frozen=True, slots=True)
class AttachmentInfo:
    """What checking an upload found: its type, and dimensions or pages."""

    mime_type: str
    width: int | None = None
    height: int | None = None
    pages: int | None = None


def inspect_upload(data: bytes, declared_type: str | None = None) -> AttachmentInfo:
    """Check an upload's bytes (see the module); raises :class:`InvalidAttachment`."""
    limit = conf.ATTACHMENT_MAX_BYTES
    if len(data) > limit:
        raise InvalidAttachment(
            "attachment_too_large",
            f"attachments may have at most {limit} bytes; this one has {len(data)}.",
            field="file",
        )
    if not data:
        raise InvalidAttachment("empty_file", "the file is empty.", field="file")
    mime_type = detect_type(data)
    allowed = conf.ATTACHMENT_TYPES
    if mime_type is None or mime_type not in allowed:
        raise InvalidAttachment(
            "unsupported_type",
            f"attachments must be one of {', '.join(sorted(allowed))}"
            + (f"; this file is {mime_type}." if mime_type else "; the file's type is unknown."),
            field="file",
        )
    declared = (declared_type or "").split(";")[0].strip().lower()
    declared = _ALIASES.get(declared, declared)
    if declared not in _UNDECLARED and declared != mime_type:
        raise InvalidAttachment(
            "type_mismatch",
            f"the file was declared {declared} but its bytes are {mime_type}.",
            field="file",
        )
    if mime_type in IMAGE_TYPES:
        return _inspect_image(data, mime_type)
    return _inspect_pdf(data)


def _inspect_image(data: bytes, mime_type: str) -> AttachmentInfo:
    # Imported here: only uploads need Pillow.
    from PIL import Image

    max_pixels = conf.ATTACHMENT_MAX_PIXELS
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=[_PIL_FORMATS[mime_type]]) as image:
                width, height = image.size
                # Before load(): the header says how big it decodes, so a
                # bomb is refused without decompressing it.
                if width * height > max_pixels:
                    raise InvalidAttachment(
                        "image_too_large",
                        f"images may have at most {max_pixels} pixels; this one is "
                        f"{width}x{height}.",
                        field="file",
                    )
                image.load()
        # Pillow pads a PNG whose data ends early but cleanly; count its rows.
        if mime_type == "image/png" and not png_is_whole(data):
            raise InvalidAttachment(
                "invalid_image", "the file is not a complete image/png image.", field="file"
            )
    except InvalidAttachment:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise InvalidAttachment(
            "image_too_large", f"images may have at most {max_pixels} pixels.", field="file"
        ) from None
    except Exception:  # Pillow raises many types for damaged files.
        raise InvalidAttachment(
            "invalid_image", f"the file is not a complete {mime_type} image.", field="file"
        ) from None
    return AttachmentInfo(mime_type, width=width, height=height)


def _inspect_pdf(data: bytes) -> AttachmentInfo:
    if b"%%EOF" not in data[-2048:]:
        raise InvalidAttachment(
            "invalid_pdf", "the PDF is truncated (no end-of-file marker).", field="file"
        )
    # Pages in compressed object streams are not visible to this count; such a
    # file is accepted with pages unknown (docs/attachments.md).
    pages = len(_PDF_PAGE.findall(data)) or None
    limit = conf.ATTACHMENT_MAX_PDF_PAGES
    if pages is not None and pages > limit:
        raise InvalidAttachment(
            "too_many_pages",
            f"PDFs may have at most {limit} pages; this one has {pages}.",
            field="file",
        )
    return AttachmentInfo("application/pdf", pages=pages)
