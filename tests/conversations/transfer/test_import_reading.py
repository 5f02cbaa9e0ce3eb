"""Reading import files a record at a time: JSON Lines, one document, a top-level array
streamed an item at a time; every malformed record in its place, the others still read."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from llm_conversations.conversations.transfer import import_buffer
from llm_conversations.conversations.transfer.import_reading import (
    MAX_RECORD_DEPTH,
    ImportFile,
    Source,
    deeper_than,
)
from llm_conversations.exceptions import InvalidImport

DEEP = b"[" * 200_000 + b"]" * 200_000


def read(source: Source, **options: Any) -> list[tuple[str, Any]]:
    """Each record's place and value; an error as (code, message)."""
    return [
        (
            record.where,
            (record.value.code, record.value.message)
            if isinstance(record.value, InvalidImport)
            else record.value,
        )
        for record in ImportFile(source, **options).records()
    ]


def test_json_lines_are_one_record_a_line_whatever_each_line_holds() -> None:
    text = '{"a": 1}\n\n{"b": 2}\nnull\n5\n"s"\n{bad\n'
    records = read(io.StringIO(text))
    assert records[:5] == [
        ("line 1", {"a": 1}),
        ("line 3", {"b": 2}),
        ("line 4", None),
        ("line 5", 5),
        ("line 6", "s"),
    ]
    where, (code, message) = records[5]
    assert (where, code) == ("line 7", "invalid_import")
    assert message.startswith("not a JSON line: Expecting property name")
    assert [where for where, _ in read(io.StringIO("[1]\n[2]\n"), lines_only=True)] == [
        "line 1",
        "line 2",
    ]


def test_one_document_on_several_lines_is_one_record() -> None:
    assert read(io.StringIO('\n{\n  "a": [1,\n 2]\n}\n')) == [("", {"a": [1, 2]})]


def test_a_top_level_array_is_read_an_item_at_a_time() -> None:
    text = '[{"a": 1}, {"b": 2},\n {"c": 3}]'
    assert read(io.StringIO(text)) == [
        ("item 1", {"a": 1}),
        ("item 2", {"b": 2}),
        ("item 3", {"c": 3}),
    ]
    records = list(ImportFile(io.StringIO(text)).records())
    assert {record.document for record in records} == {False}


def test_an_array_that_is_one_record_is_read_whole() -> None:
    def is_messages(first: Any) -> bool:
        return "role" in first

    text = '[{"role": "user"}, {"role": "assistant"}]'
    assert read(io.StringIO(text), whole_array=is_messages) == [
        ("", [{"role": "user"}, {"role": "assistant"}])
    ]
    lines = '[{"role": "user"}]\n[{"role": "tool"}]\n'
    assert read(io.StringIO(lines), whole_array=is_messages) == [
        ("line 1", [{"role": "user"}]),
        ("line 2", [{"role": "tool"}]),
    ]
    assert read(io.StringIO("[]")) == [("", [])]


@pytest.mark.parametrize(
    ("item", "code", "message"),
    [
        (DEEP, "too_deep", f"the record nests deeper than {MAX_RECORD_DEPTH} levels."),
        (
            b"[" * (MAX_RECORD_DEPTH + 1) + b"]" * (MAX_RECORD_DEPTH + 1),
            "too_deep",
            f"the record nests deeper than {MAX_RECORD_DEPTH} levels.",
        ),
        (b'{"b": tru}', "invalid_import", "not JSON: Expecting value at line 2, column 7."),
        (b'{"b": "\xff"}', "invalid_import", "not UTF-8 text: the byte 0xff at line 2, column 8."),
        (
            b'{"n": ' + b"9" * 5000 + b"}",
            "invalid_import",
            "not JSON: a number has too many digits to read.",
        ),
    ],
)
def test_an_item_that_cannot_be_read_is_reported_and_the_next_read(
    item: bytes, code: str, message: str
) -> None:
    source = io.BytesIO(b'[{"a": 1},\n' + item + b',\n{"c": 3}]')
    assert read(source) == [("item 1", {"a": 1}), ("item 2", (code, message)), ("item 3", {"c": 3})]


def test_lines_that_cannot_be_read_are_reported_and_the_next_read() -> None:
    lines = [b'{"a": 1}', DEEP, b'{"b": "x\xfe"}', b'{"n": ' + b"9" * 5000 + b"}", b'{"c": 3}']
    assert read(io.BytesIO(b"\n".join(lines))) == [
        ("line 1", {"a": 1}),
        ("line 2", ("too_deep", f"the record nests deeper than {MAX_RECORD_DEPTH} levels.")),
        ("line 3", ("invalid_import", "not UTF-8 text: the byte 0xfe at line 3, column 9.")),
        ("line 4", ("invalid_import", "not a JSON line: a number has too many digits to read.")),
        ("line 5", {"c": 3}),
    ]


def test_a_broken_array_is_read_up_to_where_it_breaks() -> None:
    assert read(io.StringIO('[{"a": 1}, {"b": ')) == [
        ("item 1", {"a": 1}),
        ("item 2", ("invalid_import", "not JSON: Expecting value at line 1, column 18.")),
        ("the file", ("invalid_import", "the file ends inside its array, after item 2.")),
    ]
    (first, (where, (code, message))) = read(io.StringIO('[{"a": 1} {"b": 2}]'))
    assert first == ("item 1", {"a": 1})
    assert (where, code) == ("the file", "invalid_import")
    assert message.startswith("not JSON after item 1: a comma or the array's end was expected")


@pytest.mark.parametrize(
    ("start", "what"),
    [
        (b"PK\x03\x04\x14\x00", "a zip archive: import the conversations.json inside it"),
        (b"\x1f\x8b\x08\x00", "gzip-compressed: decompress it first"),
    ],
)
def test_an_archive_is_refused_whole(start: bytes, what: str) -> None:
    assert read(io.BytesIO(start + b"\x00" * 100)) == [
        ("the file", ("invalid_import", f"the file is {what}."))
    ]


def test_no_json_at_all() -> None:
    assert read(io.StringIO(" \n\n")) == [
        ("the file", ("invalid_import", "the file holds no JSON."))
    ]


def test_chunks_that_split_characters_values_and_lines_read_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(import_buffer, "CHUNK_CHARS", 3)
    items = [{"a": "é" * 7}, {"b": 12345678}, {"c": ["ü", {"d": '\\"]'}]}]
    array = json.dumps(items, ensure_ascii=False).encode()
    assert [value for _, value in read(io.BytesIO(array))] == items
    lines = "\n".join(json.dumps(item, ensure_ascii=False) for item in items)
    assert [value for _, value in read(io.BytesIO(lines.encode()))] == items
    assert [value for _, value in read(line + "\n" for line in lines.split("\n"))] == items
    # A byte order mark is not text.
    assert read(io.BytesIO(b"\xef\xbb\xbf" + array))[0] == ("item 1", items[0])


def test_depth_is_measured_without_recursion() -> None:
    value: Any = []
    for _ in range(100_000):
        value = [value]
    assert deeper_than(value, MAX_RECORD_DEPTH)
    assert not deeper_than({"a": [[{"b": 1}]]}, 4)
    assert deeper_than({"a": [[{"b": []}]]}, 4)
