"""Hostile import files: every malformed record reported in its place while the import
goes on, through ``manage.py import_conversations``, in memory bounded by one conversation."""

from __future__ import annotations

import json
import tracemalloc
import zipfile
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from llm_conversations.conversations import load_messages
from llm_conversations.conversations.transfer.import_formats import chatgpt
from llm_conversations.conversations.transfer.import_reading import MAX_RECORD_DEPTH
from llm_conversations.conversations.transfer.importing import Importer
from llm_conversations.exceptions import InvalidImport
from llm_conversations.models import Conversation
from tests.support.import_files import chatgpt_conversation, openai_line

pytestmark = pytest.mark.django_db

DEEP = "[" * 200_000 + "]" * 200_000
TOO_DEEP = f"too_deep: the record nests deeper than {MAX_RECORD_DEPTH} levels."


@pytest.fixture
def alice() -> Any:
    return get_user_model().objects.create_user("alice")


def command(path: Path, *options: str) -> tuple[str, list[str], str | None]:
    """stdout, stderr's lines and the CommandError, if any, of an import for alice."""
    out, err = StringIO(), StringIO()
    try:
        call_command(
            "import_conversations",
            str(path),
            *options,
            "--default-owner",
            "alice",
            stdout=out,
            stderr=err,
        )
    except CommandError as exc:
        return out.getvalue(), err.getvalue().splitlines(), str(exc)
    return out.getvalue(), err.getvalue().splitlines(), None


def conversation(number: int, **changes: Any) -> dict[str, Any]:
    """A ChatGPT conversation of two turns, with ``changes`` to its fields."""
    return {**chatgpt_conversation(number, 2, 40), **changes}


def titles() -> list[str]:
    return sorted(Conversation.objects.values_list("title", flat=True))


def test_a_chatgpt_export_reports_each_malformed_conversation_and_imports_the_rest(
    alice: Any, tmp_path: Path
) -> None:
    huge = int("9" * 400)
    unordered = conversation(2, current_node=None)
    unordered["mapping"]["n1"]["message"]["create_time"] = huge
    cycle = conversation(5)
    cycle["mapping"]["root"]["parent"] = "n1"
    items = [
        json.dumps(conversation(1)),
        json.dumps(unordered),  # a 400-digit create_time
        DEEP,
        json.dumps(conversation(4, current_node="gone")),
        json.dumps(cycle),
        json.dumps(conversation(6, create_time=huge)),
        json.dumps(conversation(7)),
    ]
    path = tmp_path / "conversations.json"
    path.write_text("[" + ",\n".join(items) + "]")
    out, err, error = command(path, "--format", "chatgpt")
    assert error is None
    assert err == [
        "item 2: invalid_import at mapping.n1.message.create_time: "
        "mapping.n1.message.create_time is out of range.",
        f"item 3: {TOO_DEEP}",
        "item 4: invalid_import at current_node: current_node names no node of the mapping.",
        "item 5: invalid_import at mapping.root.parent: "
        "mapping.root.parent goes round in a cycle (back to n1).",
        "item 6: invalid_import at create_time: create_time is out of range.",
    ]
    assert out.strip().startswith("Imported 2 conversation(s) (4 message(s)")
    assert titles() == ["Conversation 1", "Conversation 7"]


def test_json_lines_report_each_bad_line_by_its_number_and_import_the_rest(
    alice: Any, tmp_path: Path
) -> None:
    lines = [
        openai_line(conversation(1)).encode(),
        b"null",
        b"5",
        b'"a string"',
        b'{"messages": [{"role": "user", "content": "caf\xe9"}]}',  # Latin-1, not UTF-8
        DEEP.encode(),
        b"",
        openai_line(conversation(8)).encode(),
    ]
    path = tmp_path / "chats.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    out, err, error = command(path, "--format", "openai")
    assert error is None
    assert [line.split(": ", 2)[:2] for line in err] == [
        ["line 2", "invalid_import"],
        ["line 3", "invalid_import"],
        ["line 4", "invalid_import"],
        ["line 5", "invalid_import"],
        ["line 6", "too_deep"],
    ]
    assert err[3] == "line 5: invalid_import: not UTF-8 text: the byte 0xe9 at line 5, column 47."
    assert out.strip().startswith("Imported 2 conversation(s)")
    # --strict stops at the first, naming it; what came before stays.
    Conversation.objects.all().delete()
    out, err, error = command(path, "--format", "openai", "--strict")
    assert error is not None
    assert error.startswith("line 2: invalid_import: ")
    assert error.endswith("(1 conversation(s) imported before it).")
    assert Conversation.objects.count() == 1


def test_our_own_form_reports_lines_that_are_not_records(alice: Any, tmp_path: Path) -> None:
    path = tmp_path / "backup.jsonl"
    path.write_bytes(b'null\n[1]\n"x"\n\xff\xfe{}\n')
    _, err, error = command(path)
    assert error is not None
    assert "refused 4" in error
    assert [line.split(":")[0] for line in err] == ["line 1", "line 2", "line 3", "line 4"]
    assert all(line.split(": ")[1].startswith("invalid_import") for line in err)
    assert err[3].endswith("not UTF-8 text: the byte 0xff at line 4, column 1.")


def test_a_zip_is_refused_naming_what_to_import(alice: Any, tmp_path: Path) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("conversations.json", json.dumps([conversation(1)]))
    _, err, error = command(archive, "--format", "auto")
    assert err == [
        "the file: invalid_import: the file is a zip archive: "
        "import the conversations.json inside it."
    ]
    assert error is not None
    assert "refused 1." in error
    # Inside it, with a byte order mark before it: imported.
    inner = tmp_path / "conversations.json"
    inner.write_bytes(b"\xef\xbb\xbf" + zipfile.ZipFile(archive).read("conversations.json"))
    _, err, error = command(inner, "--format", "auto")
    assert (err, error) == ([], None)
    assert titles() == ["Conversation 1"]


def test_a_chatgpt_branch_must_be_whole() -> None:
    dangling = conversation(1)
    dangling["mapping"]["n0"]["parent"] = "nowhere"
    loop = conversation(2, current_node=None)
    loop["mapping"]["root"]["parent"] = "n1"
    loop["mapping"]["n1"]["children"] = ["root"]
    for record, field in [
        (dangling, "mapping.n0.parent"),
        (loop, "mapping"),
        (conversation(3, current_node=["n1"]), "current_node"),
    ]:
        with pytest.raises(InvalidImport) as refused:
            chatgpt.parse(record)
        assert refused.value.field == field
    # Without a current node: the last leaf written, whatever its time's size.
    fork = conversation(4, current_node=None)
    fork["mapping"]["n1"]["message"]["create_time"] = 10**30  # more than a float holds exactly
    fork["mapping"]["n2"] = {**fork["mapping"]["n1"], "id": "n2"}
    fork["mapping"]["n2"]["message"] = {**fork["mapping"]["n1"]["message"], "create_time": 1.0}
    fork["mapping"]["n0"]["children"] = ["n1", "n2"]
    assert chatgpt._branch(fork)[-1][0] == "n1"


def test_a_conversation_with_no_message_is_reported(alice: Any) -> None:
    hidden = conversation(1)
    for node in ("n0", "n1"):
        hidden["mapping"][node]["message"]["metadata"] = {
            "is_visually_hidden_from_conversation": True
        }
    imported = Importer(default_owner=alice).import_file([json.dumps([hidden])], "chatgpt")
    assert imported.conversations == 1
    assert [(p.where, p.code) for p in imported.left_out] == [("item 1", "empty_conversation")]
    assert load_messages(Conversation.objects.get()) == []


@pytest.mark.parametrize("fmt", ["chatgpt", "openai"])
def test_memory_holds_one_conversation_not_the_file(alice: Any, tmp_path: Path, fmt: str) -> None:
    # 60 conversations of 4 turns of 25,000 characters: 6 MB.
    records = [chatgpt_conversation(number, 4, 25_000) for number in range(60)]
    path = tmp_path / "export"
    with path.open("w", encoding="utf-8") as file:
        if fmt == "chatgpt":
            file.write("[" + ",".join(json.dumps(record) for record in records) + "]")
        else:
            file.writelines(openai_line(record) + "\n" for record in records)
    size = path.stat().st_size
    del records
    tracemalloc.start()
    try:
        with path.open(encoding="utf-8") as source:
            imported = Importer(default_owner=alice).import_file(source, fmt)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (imported.conversations, imported.problems) == (60, [])
    # One conversation is 100 kB of text; reading the file whole took twice its size.
    assert peak < size / 4, f"{peak / 1e6:.1f} MB at the peak for a {size / 1e6:.1f} MB file"
