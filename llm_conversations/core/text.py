"""What text and JSON every supported database can store, in one policy.

PostgreSQL refuses NUL characters in text and JSON; no database stores a lone
surrogate in UTF-8; JSON columns refuse non-finite numbers (``1e400`` decodes
to infinity). Client input that holds one is refused, naming the field; model
and tool output is made storable with :func:`storable_text` and flagged.
This module imports nothing from Django.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

__all__ = [
    "MAX_JSON_DEPTH",
    "REPLACEMENT",
    "Problem",
    "json_problem",
    "storable_text",
    "text_problem",
]

REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Deeper JSON is refused: recursion limits in parsers and encoders sit near 1,000.
MAX_JSON_DEPTH = 64


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored, or ``None`` when it can."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    return "a NUL character" if found.group() == "\x00" else "a lone surrogate (invalid Unicode)"


def storable_text(text: str) -> str:
    """``text`` with NUL characters and lone surrogates replaced by U+FFFD."""
    return _UNSTORABLE.sub(REPLACEMENT, text) if _UNSTORABLE.search(text) else text


class Problem(NamedTuple):
    """Where a value cannot be stored (a dotted path), a stable code, and why."""

    path: str
    code: str
    why: str


def json_problem(value: Any, path: str = "", depth: int = 0) -> Problem | None:
    """The first place in decoded JSON that cannot be stored, or ``None``.

    Codes: ``invalid_text`` (NUL or lone surrogate, in a value or a key),
    ``invalid_number`` (not finite), ``too_deep`` (over ``MAX_JSON_DEPTH``).
    Paths are dotted with ``[i]`` for list items, as the API names fields.
    """
    if depth > MAX_JSON_DEPTH:
        return Problem(path, "too_deep", f"nesting deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, str):
        problem = text_problem(value)
        return Problem(path, "invalid_text", problem) if problem else None
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return Problem(path, "invalid_number", "a number that is not finite")
    if isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            problem = text_problem(str(key))
            if problem:
                return Problem(child, "invalid_text", problem)
            found = json_problem(item, child, depth + 1)
            if found:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = json_problem(item, f"{path}[{index}]", depth + 1)
            if found:
                return found
    return None
