"""Other tools' formats the importer reads, one parser module each.

Each module names its format (``NAME``), splits a parsed file into its
conversations (``split``), says whether a file looks like it (``detect``) and
reads one conversation into a :class:`~.foreign_conversations.ForeignConversation`
(``parse``). :class:`ForeignFile` gives the importer the conversations of the
records ``conversations/transfer/import_reading.py`` reads, a file's top-level array an
item at a time; the importer (``conversations/transfer/importing.py``) stores them
through the store's rules, as it stores our own export.

Pure: no Django, no database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from llm_conversations.conversations.transfer.import_formats import (
    ai_sdk,
    chatgpt,
    claude,
    langchain,
    openai_messages,
)
from llm_conversations.conversations.transfer.import_formats.foreign_conversations import (
    ForeignConversation,
    ForeignMessage,
    LeftOut,
)
from llm_conversations.conversations.transfer.import_reading import Record
from llm_conversations.exceptions import InvalidImport

__all__ = [
    "FOREIGN_FORMATS",
    "ForeignConversation",
    "ForeignFile",
    "ForeignFormat",
    "ForeignMessage",
    "LeftOut",
    "detect_format",
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
    fmt.name: fmt for fmt in map(_format, (chatgpt, claude, ai_sdk, langchain, openai_messages))
}


class ForeignFile:
    """The conversations of one foreign file, a record at a time (``fmt``: the
    file's format; ``None`` tells it from the first record that is JSON)."""

    def __init__(self, fmt: ForeignFormat | None) -> None:
        self.fmt = fmt

    def whole_array(self, first: Any) -> bool:
        """Whether the file's top-level array, whose first item is ``first``, is one
        conversation (its messages) rather than a list of them: ``split`` of the
        array cut to that item answers the array itself."""
        probe = [first]
        try:
            fmt = self.fmt or detect_format(probe)
            items = fmt.split(probe)
        except InvalidImport:
            return False
        return len(items) == 1 and items[0][1] is probe

    def conversations(self, record: Record) -> list[tuple[str, Any]]:
        """The conversations of ``record``, each with where it is (``item 2``,
        ``line 3``, ``line 3 item 2``). Raises the record's :class:`InvalidImport`,
        or why it holds no conversations of the format (``unknown_format`` when
        the format is still to be told and this record fits none)."""
        if isinstance(record.value, InvalidImport):
            raise record.value
        if self.fmt is None and not isinstance(record.value, list | Mapping):
            # The format is told by the first conversation, not by a stray value.
            raise InvalidImport("invalid_import", "the record is not a JSON object or array.")
        if not record.document:  # an item of the file's array: one conversation
            if self.fmt is None:
                self.fmt = detect_format([record.value])
            return [(record.where, record.value)]
        if self.fmt is None:
            self.fmt = detect_format(record.value)
        items = self.fmt.split(record.value)
        if len(items) == 1:
            return [(record.where or items[0][0], items[0][1])]
        return [(f"{record.where} {where}".strip(), item) for where, item in items]


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
