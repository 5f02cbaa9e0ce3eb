"""Other tools' formats the importer reads, one parser module each.

Each module names its format (``NAME``), splits a parsed file into its
conversations (``split``), says whether a file looks like it (``detect``) and
reads one conversation into a :class:`~.records.ForeignConversation`
(``parse``). The importer (``conversations/importing.py``) stores what they
read through the store's rules, as it stores our own export.

Pure: no Django, no database.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from llm_conversations.conversations.import_formats import ai_sdk, chatgpt, claude, openai_messages
from llm_conversations.conversations.import_formats.records import (
    ForeignConversation,
    ForeignMessage,
    LeftOut,
)
from llm_conversations.exceptions import InvalidImport

__all__ = [
    "FOREIGN_FORMATS",
    "ForeignConversation",
    "ForeignFormat",
    "ForeignMessage",
    "LeftOut",
    "conversations",
    "detect_format",
    "first_document",
    "read_document",
]


@dataclass(frozen=True, slots=True)
class ForeignFormat:
    """A parser of one foreign format (see the module)."""

    name: str
    split: Callable[[Any], list[tuple[str, Any]]]
    detect: Callable[[Any], bool]
    parse: Callable[[Any], ForeignConversation]


def _format(module: ModuleType) -> ForeignFormat:
    return ForeignFormat(module.NAME, module.split, module.detect, module.parse)


# In the order detection tries them: the most particular shapes first.
FOREIGN_FORMATS: dict[str, ForeignFormat] = {
    fmt.name: fmt for fmt in map(_format, (chatgpt, claude, ai_sdk, openai_messages))
}


def read_document(lines: Iterable[str]) -> list[tuple[str, Any]]:
    """A foreign file: one JSON document, or else JSON Lines (one conversation a line).

    Returns the documents with where each starts (``""`` for the whole file,
    ``"line 3"``), in file order; a line that is not JSON is an
    :class:`InvalidImport` in its place, so it is reported and the others
    still imported.
    """
    text = "".join(lines)
    try:
        return [("", json.loads(text))]
    except ValueError:
        pass
    documents: list[tuple[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                documents.append((f"line {number}", json.loads(line)))
            except ValueError as exc:
                error = InvalidImport("invalid_import", f"not a JSON line: {exc}.")
                documents.append((f"line {number}", error))
    if not documents:
        raise InvalidImport("invalid_import", "the file holds no JSON.")
    return documents


def first_document(documents: list[tuple[str, Any]]) -> Any:
    """The first document that is JSON (what detection looks at), or ``None``."""
    return next((doc for _, doc in documents if not isinstance(doc, InvalidImport)), None)


def conversations(
    fmt: ForeignFormat, documents: list[tuple[str, Any]]
) -> Iterable[tuple[str, Any]]:
    """Each conversation of ``documents`` with where it is (``item 2``, ``line 3``);
    a line that is not JSON stays in its place, an :class:`InvalidImport`."""
    for start, document in documents:
        if isinstance(document, InvalidImport):
            yield start, document
            continue
        items = fmt.split(document)
        for where, item in items:
            yield (start if len(items) == 1 else f"{start} {where}".strip()) or where, item


def detect_format(document: Any) -> ForeignFormat:
    """The foreign format a parsed file is in; ``unknown_format`` when none fits."""
    for fmt in FOREIGN_FORMATS.values():
        if fmt.detect(document):
            return fmt
    raise InvalidImport(
        "unknown_format",
        "the file is in none of the formats read here (ours, "
        + ", ".join(FOREIGN_FORMATS)
        + "); name it with --format.",
    )
