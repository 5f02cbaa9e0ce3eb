"""Whether a PNG's image data is whole: every row its header promises is there.

Pillow decodes a PNG whose compressed data ends cleanly but early (a file cut
after two rows and closed again) without complaint, padding the missing rows.
An upload check needs to know, so this reads the chunks itself: the header's
size, depth, colour type and interlacing give the exact length of the
decompressed data, and the image data must inflate to at least that much.
"""

from __future__ import annotations

import struct
import zlib

__all__ = ["png_is_whole"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Samples per pixel by colour type: grey, RGB, palette, grey+alpha, RGBA.
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
# Adam7's passes: first column, first row, column step, row step.
_ADAM7 = (
    (0, 0, 8, 8),
    (4, 0, 8, 8),
    (0, 4, 4, 8),
    (2, 0, 4, 4),
    (0, 2, 2, 4),
    (1, 0, 2, 2),
    (0, 1, 1, 2),
)


def _expected_length(width: int, height: int, depth: int, colour: int, interlaced: bool) -> int:
    bits = _CHANNELS[colour] * depth
    passes = _ADAM7 if interlaced else ((0, 0, 1, 1),)
    total = 0
    for x0, y0, dx, dy in passes:
        columns = (width - x0 + dx - 1) // dx if width > x0 else 0
        rows = (height - y0 + dy - 1) // dy if height > y0 else 0
        if columns and rows:
            # Each row is a filter byte, then its samples packed to whole bytes.
            total += rows * (1 + (columns * bits + 7) // 8)
    return total


def png_is_whole(data: bytes) -> bool:
    """Whether ``data`` (a PNG whose size was already checked) holds all its rows.

    Unknown colour types and malformed chunks count as not whole; Pillow
    reports those too. Decompression stops one byte past what is needed.
    """
    if not data.startswith(_SIGNATURE):
        return False
    at = len(_SIGNATURE)
    header: tuple[int, int, int, int, int] | None = None
    compressed = bytearray()
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        body = data[at + 8 : at + 8 + length]
        if len(body) < length:
            return False
        if kind == b"IHDR" and length == 13:
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            header = (width, height, depth, colour, interlace)
        elif kind == b"IDAT":
            compressed += body
        elif kind == b"IEND":
            break
        at += 12 + length  # length, type, data, CRC
    if header is None or header[3] not in _CHANNELS:
        return False
    width, height, depth, colour, interlace = header
    needed = _expected_length(width, height, depth, colour, interlace == 1)
    try:
        inflated = zlib.decompressobj().decompress(bytes(compressed), needed + 1)
    except zlib.error:
        return False
    return len(inflated) >= needed
