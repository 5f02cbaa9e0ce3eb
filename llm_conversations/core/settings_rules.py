"""What every rule of a setting shares: the kinds of value a setting may hold, and
:class:`EntryProblem`, one problem of a ``PROVIDERS`` or ``MCP_SERVERS`` entry.

The system checks (``llm_conversations.checks``), the provider registry, the MCP
servers' settings and ``MODEL_INFO`` judge values with these predicates, so a
"positive integer" or "a number of seconds" means the same in each.

``True`` is never a number here: ``bool`` is an ``int`` subclass, but
``TIMEOUT=True`` is a mistake, not one second. Every number of seconds is
finite: each is added to a clock or given to a wait (``timedelta``, a lock's
or a condition's timeout), where infinity overflows; ``None`` is how a setting
that may go unbounded says so. The names say which numbers are finite; an
integer always is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeGuard

__all__ = [
    "EntryProblem",
    "is_finite_non_negative_number",
    "is_finite_positive_number",
    "is_non_negative_integer",
    "is_optional_finite_positive_number",
    "is_optional_positive_integer",
    "is_positive_integer",
    "unknown_key_problems",
]


@dataclass(frozen=True, slots=True)
class EntryProblem:
    """One problem of a settings entry, with the system check id that reports it."""

    id: str
    """``llm_conversations.E0NN`` for an error, ``llm_conversations.W0NN`` for a warning."""
    message: str
    hint: str | None = None

    @property
    def is_error(self) -> bool:
        """Whether the entry cannot be used; a warning only shows in ``manage.py check``."""
        return self.id.rpartition(".")[2].startswith("E")


def unknown_key_problems(
    entry: Mapping[object, object], known: frozenset[str], where: str, check_id: str
) -> list[EntryProblem]:
    """One ``check_id`` problem per key of ``entry`` not among ``known``, in key order."""
    return [
        EntryProblem(
            check_id,
            f"{where} has an unknown key {key!r}.",
            hint=f"Known keys: {', '.join(sorted(known))}.",
        )
        for key in sorted(set(entry) - known, key=str)
    ]


def is_positive_integer(value: object) -> bool:
    """An ``int`` above zero."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def is_non_negative_integer(value: object) -> bool:
    """An ``int`` of zero or more: a count that may be zero."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_finite_number(value: object) -> TypeGuard[int | float]:
    # NaN and infinity are floats; an int is always finite (and may be too large
    # for math.isfinite, which converts it to a float).
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool)


def is_optional_positive_integer(value: object) -> bool:
    """``None`` (no limit) or a positive integer."""
    return value is None or is_positive_integer(value)


def is_finite_positive_number(value: object) -> bool:
    """An ``int`` or a finite ``float`` above zero: a number of seconds."""
    return _is_finite_number(value) and value > 0


def is_finite_non_negative_number(value: object) -> bool:
    """An ``int`` or a finite ``float`` of zero or more."""
    return _is_finite_number(value) and value >= 0


def is_optional_finite_positive_number(value: object) -> bool:
    """``None`` (no limit) or a finite positive number of seconds."""
    return value is None or is_finite_positive_number(value)
