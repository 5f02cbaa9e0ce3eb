"""A PNG cut short but closed cleanly is refused; every whole PNG Pillow writes passes."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from llm_conversations.conversations.png import png_is_whole
from llm_conversations.conversations.uploads import inspect_upload
from llm_conversations.exceptions import InvalidAttachment

WIDTH = HEIGHT = 64


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def rows_only(rows: int) -> bytes:
    """An RGB PNG whose header promises 64 rows and whose data holds ``rows``, cleanly closed."""
    header = struct.pack(">IIBBBBB", WIDTH, HEIGHT, 8, 2, 0, 0, 0)
    raw = b"".join(b"\x00" + bytes(WIDTH * 3) for _ in range(rows))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def pillow_png(mode: str, **options: object) -> bytes:
    image = Image.new(mode, (WIDTH, HEIGHT - 3))
    image.putdata(
        [
            (i * 7) % 251 if mode in ("L", "P", "1") else ((i * 7) % 251,) * len(mode)
            for i in range(WIDTH * (HEIGHT - 3))
        ]
    )
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", **options)
    return buffer.getvalue()


def test_a_png_with_two_of_its_rows_is_refused_though_pillow_decodes_it() -> None:
    short = rows_only(2)
    with Image.open(io.BytesIO(short)) as image:
        image.load()  # Pillow pads the missing rows without a word
    assert not png_is_whole(short)
    with pytest.raises(InvalidAttachment) as info:
        inspect_upload(short, "image/png")
    assert (info.value.code, info.value.field) == ("invalid_image", "file")


def test_a_png_with_all_its_rows_passes() -> None:
    assert png_is_whole(rows_only(HEIGHT))
    assert inspect_upload(rows_only(HEIGHT), "image/png").width == WIDTH


@pytest.mark.parametrize(
    ("mode", "options"),
    [
        ("RGB", {}),
        ("RGBA", {}),
        ("L", {}),
        ("LA", {}),
        ("P", {}),
        ("1", {}),
        ("RGB", {"interlace": 1}),
        ("L", {"bits": 4}),
    ],
)
def test_whole_pngs_of_every_kind_pass(mode: str, options: dict[str, object]) -> None:
    data = pillow_png(mode, **options)
    assert png_is_whole(data)
    # One byte fewer of image data: the same file no longer holds every row.
    assert not png_is_whole(data[: data.index(b"IEND") - 40])


def test_what_is_not_a_png_is_not_whole() -> None:
    assert not png_is_whole(b"GIF89a")
    assert not png_is_whole(b"\x89PNG\r\n\x1a\n" + chunk(b"IEND", b""))
