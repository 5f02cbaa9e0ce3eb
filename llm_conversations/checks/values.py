"""What the checks of every module share: the messages for a value of the wrong
kind, DRF rates, and problems of an entry as check messages. The kinds of value a
setting may hold are :mod:`llm_conversations.core.settings_rules`."""

from __future__ import annotations

from collections.abc import Callable

from django.core.checks import CheckMessage, Error, Warning

from llm_conversations.conf import raw_setting
from llm_conversations.core.settings_rules import EntryProblem

__all__ = [
    "RATE_PERIODS",
    "as_check_message",
    "is_rate",
    "rate_errors",
    "setting_errors",
    "wrong_type",
]

# DRF's rate periods: the first letter counts.
RATE_PERIODS = ("s", "m", "h", "d")


def wrong_type(setting: str, expected: str, value: object, check_id: str) -> list[CheckMessage]:
    """An error naming ``setting``, what it must be, and the type it has (never the value)."""
    return [
        Error(
            f"{setting} must be {expected}.",
            hint=f"Got {type(value).__name__}.",
            id=check_id,
        )
    ]


def is_rate(value: object) -> bool:
    """A DRF rate such as ``"20/min"``: a positive count, a slash, a period."""
    if not isinstance(value, str) or value.count("/") != 1:
        return False
    number, period = value.split("/")
    return number.isdigit() and int(number) > 0 and period[:1] in RATE_PERIODS


def setting_errors(
    name: str,
    valid: Callable[[object], bool],
    expected: str,
    check_id: str,
    hint: str | None = None,
) -> list[CheckMessage]:
    """An error when the setting ``name`` is not ``valid``: what it must be, and its value."""
    value = raw_setting(name)
    if valid(value):
        return []
    message = f"LLM_CONVERSATIONS[{name!r}] must be {expected}; got {value!r}."
    return [Error(message, hint=hint, id=check_id)]


def rate_errors(name: str, check_id: str) -> list[CheckMessage]:
    """``name`` neither ``None`` nor a DRF rate such as ``"20/min"``."""
    return setting_errors(
        name,
        lambda rate: rate is None or is_rate(rate),
        "None or a rate such as '20/min'",
        check_id,
    )


def as_check_message(problem: EntryProblem) -> CheckMessage:
    """A problem of a provider or MCP server entry as the system check reports it."""
    level = Error if problem.is_error else Warning
    return level(problem.message, hint=problem.hint, id=problem.id)
