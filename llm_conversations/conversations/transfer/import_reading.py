"""Reading an import file a record at a time, in memory bounded by one record.

A file is JSON Lines (a record a line) or one JSON document. A document whose
top-level value is an array (ChatGPT's and Claude's ``conversations.json``)
is read an item at a time: :class:`ImportFile` decodes each with
``json.JSONDecoder.raw_decode`` over a buffer that holds the item being read
and grows only as that item needs. So a 50 MB export costs the memory of its
largest conversation, not of the file. (The standard library's decoder is
C; ``ijson`` would add a dependency whose fast backend needs a C library,
for a top-level array the buffer reads as fast.)

Whatever is wrong with one record is an :class:`InvalidImport` in its place
(``line 3``, ``item 2``) and the records after it are still read:

- text that is not JSON; a line that is not one JSON value;
- bytes that are not UTF-8 (a file read as bytes is decoded with
  ``surrogateescape``, so each bad byte is found in the record holding it);
- nesting deeper than :data:`MAX_RECORD_DEPTH` (JSON's decoder recurses; no
  record reaches the code after it that deep). An item of the array that
  cannot be decoded is stepped over by its brackets alone;
- a number with more digits than Python reads.

A zip or gzip file is refused whole, naming what to do. Pure: no Django.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from llm_conversations.conversations.transfer.import_buffer import Source, TextBuffer
from llm_conversations.core.text import MAX_JSON_DEPTH
from llm_conversations.exceptions import InvalidImport

__all__ = ["MAX_RECORD_DEPTH", "ImportFile", "Record", "Source", "deeper_than"]

MAX_RECORD_DEPTH = MAX_JSON_DEPTH + 16
"""How deep a record may nest: the values it stores (at most ``MAX_JSON_DEPTH``)
inside its own structure (a ChatGPT node's message's content's parts)."""

# A byte that is not UTF-8, as surrogateescape decodes it.
_BAD_BYTE = re.compile("[\udc80-\udcff]")
_ARCHIVES = {
    "PK\x03\x04": "a zip archive: import the conversations.json inside it",
    "\x1f\udc8b": "gzip-compressed: decompress it first",
}


class Record(NamedTuple):
    """One record of a file, where it is, and what it is."""

    where: str  # "line 3", "item 2", or "" for the file's one document
    value: Any  # the decoded JSON, or the InvalidImport standing in for it
    document: bool  # a whole document (the file, a line); False: an item of the top-level array


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` (decoded JSON) nests more than ``limit`` levels deep; no recursion."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        below: list[Any] = []
        for container in level:
            for child in container.values() if isinstance(container, dict) else container:
                if isinstance(child, dict | list):
                    below.append(child)
        if not below:
            return False
        level = below
    return True


def _too_deep() -> InvalidImport:
    return InvalidImport("too_deep", f"the record nests deeper than {MAX_RECORD_DEPTH} levels.")


def _decoding_error(exc: ValueError | RecursionError, what: str) -> InvalidImport:
    """Why the decoder refused a record (a ``json.JSONDecodeError`` is described by the caller)."""
    if isinstance(exc, RecursionError):
        return _too_deep()
    # Python reads integers of at most 4,300 digits.
    return InvalidImport("invalid_import", f"{what}: a number has too many digits to read.")


class ImportFile:
    """The records of one import file (see the module), read as they are asked for.

    ``lines_only``: the file is JSON Lines whatever it starts with (our own
    export form). Otherwise, when the file's one document is an array,
    ``whole_array`` is asked about its first item: ``True`` when the array is
    one record (a conversation's messages) rather than a list of them.
    """

    def __init__(
        self,
        source: Source,
        *,
        lines_only: bool = False,
        whole_array: Callable[[Any], bool] = lambda first: False,
    ) -> None:
        self._buffer = TextBuffer(source)
        self._lines_only = lines_only
        self._whole_array = whole_array

    def records(self) -> Iterator[Record]:
        """Every record in file order; a malformed one is an :class:`InvalidImport` in its place."""
        buffer = self._buffer
        if not buffer.skip_space():
            yield Record(
                "the file", InvalidImport("invalid_import", "the file holds no JSON."), True
            )
            return
        for signature, what in _ARCHIVES.items():
            if buffer.peek(len(signature)) == signature:
                error = InvalidImport("invalid_import", f"the file is {what}.")
                yield Record("the file", error, True)
                return
        if self._lines_only:
            yield from self._lines()
        elif buffer.peek() == "[":
            yield from self._array()
        else:
            yield from self._document()

    def _bad_bytes(
        self, text: str, start: int, end: int, place: Callable[[int], tuple[int, int]]
    ) -> InvalidImport | None:
        """An error for the first byte of ``text[start:end]`` that is not UTF-8, if any."""
        if not self._buffer.binary or (bad := _BAD_BYTE.search(text, start, end)) is None:
            return None
        line, column = place(bad.start())
        byte = ord(bad.group()) - 0xDC00
        return InvalidImport(
            "invalid_import",
            f"not UTF-8 text: the byte 0x{byte:02x} at line {line}, column {column}.",
        )

    def _lines(self) -> Iterator[Record]:
        """JSON Lines from ``pos`` on: each non-blank line one record."""
        buffer = self._buffer
        while True:
            number = buffer.line
            text = buffer.line_text()
            if text is None:
                return
            if text.strip():
                yield Record(f"line {number}", self._line(text, number), True)

    def _line(self, text: str, number: int) -> Any:
        """One line decoded, or why it cannot be."""
        bad = self._bad_bytes(text, 0, len(text), lambda at: (number, at + 1))
        if bad is not None:
            return bad
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return InvalidImport("invalid_import", f"not a JSON line: {exc}.")
        except (ValueError, RecursionError) as exc:
            return _decoding_error(exc, "not a JSON line")
        return _too_deep() if deeper_than(value, MAX_RECORD_DEPTH) else value

    def _item(self) -> tuple[Any, bool]:
        """The value at ``pos``, or why it cannot be decoded (``pos`` left where it
        began), and whether it was decoded."""
        buffer = self._buffer
        held, start = buffer.kept, buffer.here()
        buffer.kept = start[0] if held is None else held
        try:
            value = buffer.value()
        except json.JSONDecodeError as exc:
            line, column = buffer.place(exc.pos)
            bad = self._bad_bytes(buffer.text, buffer.pos, exc.pos + 1, buffer.place)
            described = f"not JSON: {exc.msg} at line {line}, column {column}."
            return bad or InvalidImport("invalid_import", described), False
        except (ValueError, RecursionError) as exc:
            return _decoding_error(exc, "not JSON"), False
        finally:
            buffer.kept = held
        first = start[0] - buffer.base
        bad = self._bad_bytes(buffer.text, first, buffer.pos, lambda at: buffer.place(at, start))
        if bad is not None:
            return bad, True
        return (_too_deep() if deeper_than(value, MAX_RECORD_DEPTH) else value), True

    def _document(self) -> Iterator[Record]:
        """The file's one document; or, when more follows it or it does not decode,
        JSON Lines, read again from the start."""
        buffer = self._buffer
        start = buffer.mark()
        value, decoded = self._item()
        one_line = buffer.line == start[1]
        alone = decoded and not buffer.skip_space()
        if alone or (decoded and not one_line):
            buffer.kept = None
            yield Record("" if alone else f"line {start[1]}", value, True)
            if alone:
                return
        else:
            # A line of JSON Lines, or not JSON: every line is a record of its own.
            buffer.rewind(start)
        yield from self._lines()

    def _array(self) -> Iterator[Record]:
        """The items of the file's top-level array, each a record ``item N``; the
        array as one record when ``whole_array`` says so of its first item."""
        buffer = self._buffer
        start = buffer.mark()
        buffer.advance(buffer.pos + 1)  # "["
        if buffer.skip_space() and buffer.peek() != "]":
            value, decoded = self._item()
            whole = decoded and not isinstance(value, InvalidImport) and self._whole_array(value)
        else:
            whole = True  # empty, or the file ends: read as one document
        if whole:
            buffer.rewind(start)
            yield from self._document()
            return
        buffer.kept = None
        number = 1
        while True:
            yield Record(f"item {number}", value, False)
            if not decoded and not buffer.skip_value():
                yield Record("the file", _cut_short(number), True)
                return
            if not buffer.skip_space():
                yield Record("the file", _cut_short(number), True)
                return
            mark = buffer.peek()
            buffer.advance(buffer.pos + 1)
            if mark == "]":
                break
            if mark == "," and not buffer.skip_space():
                yield Record("the file", _cut_short(number), True)
                return
            if mark != ",":
                at = buffer.place(buffer.pos - 1)
                message = (
                    f"not JSON after item {number}: a comma or the array's end was expected at "
                    f"line {at[0]}, column {at[1]}; the rest of the file is not read."
                )
                yield Record("the file", InvalidImport("invalid_import", message), True)
                return
            number += 1
            value, decoded = self._item()
        if buffer.skip_space():
            # JSON Lines after all: the array was its first line.
            yield from self._lines()


def _cut_short(number: int) -> InvalidImport:
    return InvalidImport("invalid_import", f"the file ends inside its array, after item {number}.")
