"""Checking uploads and encoding attachments for a provider.

Prints the median time of ``conversations.uploads.inspect_upload`` (the whole
check an upload goes through: magic number, full decode, pixel limit) for a
12-megapixel JPEG, a 1-megapixel PNG and a 40-page PDF, the time to refuse a
decompression bomb (a PNG whose header claims 100,000 x 100,000 pixels:
refused from the header, before any pixel is decompressed), and the time to
build the OpenAI wire form (base64 data URL) of a 5 MB image. No database.
"""

from __future__ import annotations

import io
import os
import statistics
import struct
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

from PIL import Image

from llm_conversations.conversations.uploads import inspect_upload
from llm_conversations.core.messages import ChatMessage, ImagePart
from llm_conversations.exceptions import InvalidAttachment

ROUNDS = 7


def median_ms(work: Callable[[], object]) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def encoded(size: tuple[int, int], fmt: str) -> bytes:
    # Noise, so the file is as large as a photograph of that size.
    image = Image.frombytes("RGB", size, os.urandom(size[0] * size[1] * 3))
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, quality=85)
    return buffer.getvalue()


def bomb() -> bytes:
    """A small valid PNG whose header is rewritten to claim 100,000 x 100,000 pixels."""
    buffer = io.BytesIO()
    Image.new("1", (8, 8)).save(buffer, format="PNG")
    data = bytearray(buffer.getvalue())
    header = b"IHDR" + struct.pack(">II", 100_000, 100_000) + bytes(data[24:29])
    data[12:29] = header
    data[29:33] = struct.pack(">I", zlib.crc32(header))
    return bytes(data)


def pdf(pages: int) -> bytes:
    kids = " ".join(f"{3 + n} 0 R" for n in range(pages))
    body = [f"2 0 obj << /Type /Pages /Kids [{kids}] /Count {pages} >> endobj"]
    body += [f"{3 + n} 0 obj << /Type /Page /Parent 2 0 R >> endobj" for n in range(pages)]
    return ("%PDF-1.4\n" + "\n".join(body) + "\n%%EOF\n").encode()


def refuse(data: bytes) -> None:
    try:
        inspect_upload(data)
    except InvalidAttachment as exc:
        if exc.code != "image_too_large":
            raise
    else:
        raise AssertionError("the bomb was accepted")


def main() -> None:
    photo = encoded((4000, 3000), "JPEG")
    screenshot = encoded((1000, 1000), "PNG")
    document = pdf(40)
    print(
        f"12 MP JPEG ({len(photo) / 1e6:.1f} MB): {median_ms(lambda: inspect_upload(photo)):.1f} ms"
    )
    print(
        f"1 MP PNG ({len(screenshot) / 1e6:.1f} MB): "
        f"{median_ms(lambda: inspect_upload(screenshot)):.1f} ms"
    )
    print(f"40-page PDF: {median_ms(lambda: inspect_upload(document)):.2f} ms")
    payload = bomb()
    print(
        f"bomb ({len(payload)} bytes claiming 10^10 pixels) refused in {median_ms(lambda: refuse(payload)):.2f} ms"
    )
    part = ImagePart("a1", mime_type="image/jpeg", data=os.urandom(5_000_000))
    message = ChatMessage.user([part])
    print(f"wire form of a 5 MB image (base64 data URL): {median_ms(message.to_wire):.1f} ms")


if __name__ == "__main__":
    main()
