"""Files for the attachment tests: real images and PDFs, and hostile ones."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image


def image_bytes(fmt: str = "PNG", size: tuple[int, int] = (64, 64), mode: str = "RGB") -> bytes:
    """A real image of ``size`` in ``fmt``."""
    buffer = io.BytesIO()
    Image.new(mode, size, color=0 if mode == "1" else (200, 30, 30)).save(buffer, format=fmt)
    return buffer.getvalue()


def pdf_bytes(pages: int = 1) -> bytes:
    """A minimal PDF with ``pages`` page objects."""
    kids = " ".join(f"{3 + n} 0 R" for n in range(pages))
    objects = [
        b"1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj",
        f"2 0 obj << /Type /Pages /Kids [{kids}] /Count {pages} >> endobj".encode(),
        *(
            f"{3 + n} 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 10 10] >> endobj".encode()
            for n in range(pages)
        ),
    ]
    return b"%PDF-1.4\n" + b"\n".join(objects) + b"\ntrailer << /Root 1 0 R >>\n%%EOF\n"


def bomb_bytes(width: int = 100_000, height: int = 100_000) -> bytes:
    """A small valid PNG whose header claims ``width`` x ``height`` pixels."""
    buffer = io.BytesIO()
    Image.new("1", (8, 8)).save(buffer, format="PNG")
    data = bytearray(buffer.getvalue())
    header = b"IHDR" + struct.pack(">II", width, height) + bytes(data[24:29])
    data[12:29] = header
    data[29:33] = struct.pack(">I", zlib.crc32(header))
    return bytes(data)
