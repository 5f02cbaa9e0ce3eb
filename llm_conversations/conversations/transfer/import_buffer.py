"""A file's text as an import reads it: a buffer that holds what is being read.

:class:`TextBuffer` reads a file opened as text or bytes (UTF-8, decoded with
``surrogateescape`` so a bad byte stays in the record holding it), or an
iterable of its lines, a chunk at a time. What is read is dropped once passed,
unless held (``kept``) to be read again; a value larger than a chunk doubles
what is read, so decoding it again costs at most twice its length. Values are
decoded with ``json.JSONDecoder.raw_decode`` where they begin, lines found by
their newline, and a value that cannot be decoded stepped over by its
brackets and strings alone. Pure: no Django.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

__all__ = ["CHUNK_CHARS", "Mark", "Source", "TextBuffer"]

CHUNK_CHARS = 1 << 16
"""The least a read asks for."""

Source = IO[str] | IO[bytes] | Iterable[str] | Iterable[bytes]
"""A file opened as text or bytes, or its lines."""

Mark = tuple[int, int, int]
"""A place in a file: its absolute position, line, and where that line begins."""

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
# Where a value read by its brackets alone may end or nest.
_STRUCTURE = re.compile(r'[\[\]{}",]')
_STRING_END = re.compile(r'["\\]')
# A decode error this near the end of what was read may only mean that more is to come.
_NEAR_END = 8


def _reader(source: Iterable[str] | Iterable[bytes]) -> Callable[[int], str | bytes]:
    """A ``read(size)`` of an iterable's items, one item a call (``b""`` at the end)."""
    items: Iterator[str | bytes] = iter(source)
    return lambda size: next(items, b"")


class TextBuffer:
    """The text of a file from ``pos`` on, read as it is needed.

    ``text[pos:]`` is what is not read yet; text before ``pos`` is dropped as
    more is read, except from ``kept`` on (an absolute position, while a value
    that may be read again is held). ``base`` is the absolute position of
    ``text[0]``, ``line`` the line at ``pos`` and ``line_start`` the absolute
    position where that line begins.
    """

    def __init__(self, source: Source) -> None:
        self.text = ""
        self.pos = 0
        self.base = 0
        self.kept: int | None = None
        self.line = 1
        self.line_start = 0
        self.eof = False
        self.binary = False  # bytes were read: bad bytes are looked for
        read = getattr(source, "read", None)
        self._read: Callable[[int], str | bytes] = read if callable(read) else _reader(source)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self._started = False

    def _chunk(self, size: int) -> str:
        """The next text read; empty at the end."""
        while True:
            piece = self._read(size)
            if isinstance(piece, str):
                return piece
            self.binary = self.binary or bool(piece)
            text = self._decoder.decode(piece, final=not piece)
            if text or not piece:  # a read may end inside a character
                return text

    def more(self) -> bool:
        """Read at least as much again as is pending (or a chunk); False at the end.

        Doubling what is read keeps a large value's repeated decoding linear.
        """
        if self.eof:
            return False
        want = max(CHUNK_CHARS, len(self.text) - self.pos)
        pieces, size = [], 0
        while size < want:
            piece = self._chunk(want - size)
            if not piece:
                self.eof = True
                break
            pieces.append(piece)
            size += len(piece)
        text = "".join(pieces)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")  # a byte order mark
        cut = self.pos if self.kept is None else min(self.pos, self.kept - self.base)
        self.text = self.text[cut:] + text
        self.pos -= cut
        self.base += cut
        return bool(text)

    def here(self) -> Mark:
        """Where ``pos`` is."""
        return self.base + self.pos, self.line, self.line_start

    def mark(self) -> Mark:
        """Where ``pos`` is, held from now on (``kept``) to come back to."""
        self.kept = self.base + self.pos
        return self.here()

    def rewind(self, mark: Mark) -> None:
        """Come back to ``mark``, holding nothing."""
        at, self.line, self.line_start = mark
        self.pos = at - self.base
        self.kept = None

    def advance(self, to: int) -> None:
        """Move ``pos`` to ``to``, counting the lines passed."""
        newline = self.text.rfind("\n", self.pos, to)
        if newline >= 0:
            self.line += self.text.count("\n", self.pos, to)
            self.line_start = self.base + newline + 1
        self.pos = to

    def place(self, at: int, since: Mark | None = None) -> tuple[int, int]:
        """The line and column of ``text[at]``, counted from ``since`` (held, or
        at ``pos``; ``pos`` by default)."""
        origin, line, line_start = since or self.here()
        first = origin - self.base
        newline = self.text.rfind("\n", first, at)
        column = at - newline if newline >= 0 else self.base + at - line_start + 1
        return line + self.text.count("\n", first, at), column

    def skip_space(self) -> bool:
        """Move past whitespace; False when the file ends first."""
        while True:
            found = _SPACE.match(self.text, self.pos)
            assert found is not None  # the pattern matches the empty string
            self.advance(found.end())
            if self.pos < len(self.text):
                return True
            if not self.more():
                return False

    def peek(self, size: int = 1) -> str:
        """The next ``size`` characters (fewer at the end), not passed."""
        while len(self.text) - self.pos < size and self.more():
            pass
        return self.text[self.pos : self.pos + size]

    def value(self) -> Any:
        """Decode the value at ``pos`` and move past it; raises what the decoder
        raises (``pos`` is then where the value began)."""
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                cut_short = exc.pos >= len(self.text) - _NEAR_END or exc.msg.startswith(
                    "Unterminated string"
                )
                if cut_short and self.more():
                    continue
                raise
            # A number at the end of what was read may go on.
            if end == len(self.text) and self.more():
                continue
            self.advance(end)
            return value

    def line_text(self) -> str | None:
        """The rest of the current line, its newline passed; ``None`` at the end."""
        searched = 0  # characters after pos known to hold no newline
        while (end := self.text.find("\n", self.pos + searched)) < 0:
            searched = len(self.text) - self.pos
            if not self.more():
                if self.pos >= len(self.text):
                    return None
                end = len(self.text)  # the last line, without a newline
                break
        text = self.text[self.pos : end]
        self.advance(min(end + 1, len(self.text)))
        return text

    def skip_value(self) -> bool:
        """Move past the value at ``pos`` by its brackets and strings alone, without
        decoding it; False when the file ends first."""
        depth, in_string = 0, False
        while True:
            found = (_STRING_END if in_string else _STRUCTURE).search(self.text, self.pos)
            if found is None:
                self.advance(len(self.text))
                if not self.more():
                    return False
                continue
            mark = found.group()
            if not in_string and depth == 0 and mark in ",]}":
                self.advance(found.start())
                return True
            self.advance(found.end())
            if in_string and mark == "\\":
                if not self.peek():
                    return False
                self.advance(self.pos + 1)  # the escaped character
            elif in_string or mark == '"':
                in_string = not in_string
                if not in_string and depth == 0:
                    return True
            elif mark in "[{":
                depth += 1
            else:  # "]" or "}" closing
                depth -= 1
                if depth == 0:
                    return True
