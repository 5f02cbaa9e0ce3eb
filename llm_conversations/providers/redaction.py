"""Finding API keys in text a provider sends back, exact or altered.

A provider may echo a key changed: in another case, split by other text, or
masked (``sk-SECR…wxyz``). Every piece of text of at least
:data:`FRAGMENT_CHARS` characters that a key holds (ASCII letters compared
without case) is replaced, and a whole key shorter than that.

A key of ``n`` characters has ``O(n²)`` fragments; none is listed. Every
five characters of a key hold one of its four-character pieces that start at
an even position (its *anchors*, ``n / 2`` of them), so the text is searched
for each anchor (``str.find``, at C speed) and each hit is extended both ways
along the key while the characters agree: the maximal common substring at
that alignment, redacted when five characters or longer. Fragments that touch
are replaced as one.

:func:`key_redactor` builds one :class:`KeyRedactor` per set of keys and
keeps it. ``bench/redaction.py`` measures it on a 1 MB body.
:class:`KeyRedaction`, mixed into ``Provider``, applies it to what a
provider passes on: error messages and raw reply bodies.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

__all__ = [
    "ERROR_TEXT_LIMIT",
    "FRAGMENT_CHARS",
    "REDACTED",
    "KeyRedaction",
    "KeyRedactor",
    "key_redactor",
]

REDACTED = "[redacted]"
FRAGMENT_CHARS = 5
_ANCHOR_CHARS = FRAGMENT_CHARS - 1
# Joins the strings of a decoded body so they are searched at once. No key
# holds it (no HTTP header value may), so no fragment spans two strings.
_SEPARATOR = "\x00"
# Provider text quoted in an error is cut to this many characters, after the
# key is redacted (cutting first could leave part of the key behind).
ERROR_TEXT_LIMIT = 500

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

Span = tuple[int, int]


def _folded(text: str) -> str:
    """``text`` with ASCII letters lower-cased; never longer or shorter, so offsets hold."""
    # str.lower() may change the length of other text ("İ" lowers to two characters).
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


class KeyRedactor:
    """Replaces, in text, every fragment of its keys (see the module's docstring)."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = tuple(sorted({_folded(key) for key in keys if key}))
        # Each anchor with the keys and positions it starts at.
        self.anchors: dict[str, list[tuple[str, int]]] = {}
        for key in self.keys:
            if len(key) < FRAGMENT_CHARS:
                self.anchors.setdefault(key, []).append((key, 0))
                continue
            for at in range(0, len(key) - _ANCHOR_CHARS + 1, 2):
                self.anchors.setdefault(key[at : at + _ANCHOR_CHARS], []).append((key, at))

    def spans(self, text: str) -> list[Span]:
        """Where in ``text`` fragments of the keys are, merged where they touch, in order."""
        folded = _folded(text)
        found: list[Span] = []
        # The alignments already extended, by key and offset: a full echo is walked once.
        seen: dict[tuple[str, int], list[Span]] = {}
        for anchor, places in self.anchors.items():
            hit = folded.find(anchor)
            while hit >= 0:
                for key, at in places:
                    span = self._extended(folded, hit, key, at, seen)
                    if span is not None:
                        found.append(span)
                hit = folded.find(anchor, hit + 1)
        return _merged(found)

    def _extended(
        self, folded: str, hit: int, key: str, at: int, seen: dict[tuple[str, int], list[Span]]
    ) -> Span | None:
        alignment = seen.setdefault((key, hit - at), [])
        if any(start <= hit < end for start, end in alignment):
            return None
        if len(key) < FRAGMENT_CHARS:
            return hit, hit + len(key)  # a short key counts whole
        start, end = hit, hit + _ANCHOR_CHARS
        offset = hit - at  # the text's position of the key's first character
        while start > 0 and start - offset > 0 and folded[start - 1] == key[start - 1 - offset]:
            start -= 1
        while end < len(folded) and end - offset < len(key) and folded[end] == key[end - offset]:
            end += 1
        alignment.append((start, end))
        return (start, end) if end - start >= FRAGMENT_CHARS else None

    def redact(self, text: str) -> str:
        """``text`` with each fragment of the keys replaced by :data:`REDACTED`."""
        return _replaced(text, self.spans(text)) if self.keys else text

    def redact_data(self, data: Any) -> Any:
        """Decoded JSON with every string (object keys too) redacted.

        Its distinct strings are searched joined, once, so a body of many
        small strings (a stream's chunks repeat theirs) costs what one text
        of their length does.
        """
        if not self.keys:
            return data
        texts: set[str] = set()
        _collect(data, texts)
        distinct = list(texts)
        spans = self.spans(_SEPARATOR.join(distinct))
        if not spans:
            return data
        starts, position = [], 0
        for text in distinct:
            starts.append(position)
            position += len(text) + 1
        by_text: dict[int, list[Span]] = {}
        for start, end in spans:
            index = bisect.bisect_right(starts, start) - 1
            base = starts[index]
            by_text.setdefault(index, []).append((start - base, end - base))
        table = {distinct[i]: _replaced(distinct[i], found) for i, found in by_text.items()}
        return _rebuilt(data, table)


def _collect(data: Any, texts: set[str]) -> None:
    """Add every string of decoded JSON to ``texts``, an object's keys too."""
    if isinstance(data, str):
        texts.add(data)
    elif isinstance(data, Mapping):
        for key, value in data.items():
            texts.add(str(key))
            _collect(value, texts)
    elif isinstance(data, list):
        for item in data:
            _collect(item, texts)


def _rebuilt(data: Any, table: Mapping[str, str]) -> Any:
    """A copy of ``data`` with each string in ``table`` replaced by its value there."""
    if isinstance(data, str):
        return table.get(data, data)
    if isinstance(data, Mapping):
        return {table.get(str(k), str(k)): _rebuilt(v, table) for k, v in data.items()}
    if isinstance(data, list):
        return [_rebuilt(item, table) for item in data]
    return data


def _merged(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:  # overlapping or touching: one fragment
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _replaced(text: str, spans: list[Span]) -> str:
    parts: list[str] = []
    kept = 0
    for start, end in spans:
        parts += (text[kept:start], REDACTED)
        kept = end
    parts.append(text[kept:])
    return "".join(parts)


@functools.lru_cache(maxsize=64)
def key_redactor(keys: frozenset[str]) -> KeyRedactor:
    """The redactor of ``keys``, built once per set."""
    return KeyRedactor(keys)


class _Keyed(Protocol):
    """What :class:`KeyRedaction` needs of the provider it is mixed into."""

    _api_key: str | None

    def redact(self, text: str) -> str: ...


class KeyRedaction:
    """Mixed into :class:`~llm_conversations.providers.base.Provider`: its API key
    (and any fragment of it) replaced in text and decoded bodies."""

    def redact(self: _Keyed, text: str) -> str:
        """``text`` with the API key replaced, and any fragment of it
        (another case, split, masked)."""
        redactor = _redactor_of(self._api_key)
        return text if redactor is None else redactor.redact(text)

    def redact_data(self: _Keyed, data: Any) -> Any:
        """Decoded JSON with the API key (and its fragments) replaced in every string."""
        redactor = _redactor_of(self._api_key)
        return data if redactor is None else redactor.redact_data(data)

    def error_text(self: _Keyed, text: str) -> str:
        """Provider text for an error message: the key redacted, then cut short."""
        return self.redact(text)[:ERROR_TEXT_LIMIT]


def _redactor_of(api_key: str | None) -> KeyRedactor | None:
    return key_redactor(frozenset({api_key})) if api_key else None
