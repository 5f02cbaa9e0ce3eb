"""E001-E008: ``LLM_CONVERSATIONS`` is a dict of known keys, and each value of the
kinds that ``conf`` lists (positive integers, durations, booleans, ...) is of its kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error

from llm_conversations.checks.values import setting_errors, wrong_type
from llm_conversations.conf import (
    BOOLEANS,
    DEFAULTS,
    DURATIONS,
    NON_NEGATIVE_INTEGERS,
    OPTIONAL_DURATIONS,
    OPTIONAL_POSITIVE_INTEGERS,
    POSITIVE_INTEGERS,
    raw_setting,
)
from llm_conversations.core.settings_rules import (
    is_finite_positive_number,
    is_non_negative_integer,
    is_optional_finite_positive_number,
    is_optional_positive_integer,
    is_positive_integer,
)

__all__ = ["check_settings"]


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E001 not a dict, E002 unknown key, E003 not a positive integer, E004 limits,
    E005 not a duration, E006 not a non-negative integer, E007 neither None nor a
    positive integer, E008 a boolean setting (``BOOLEANS``) not a bool."""
    value = getattr(settings, "LLM_CONVERSATIONS", {})
    if not isinstance(value, Mapping):
        return wrong_type("LLM_CONVERSATIONS", "a dict", value, "llm_conversations.E001")
    errors: list[CheckMessage] = []
    for key in sorted(set(value) - set(DEFAULTS), key=str):
        errors.append(
            Error(
                f"LLM_CONVERSATIONS has an unknown key {key!r}.",
                hint=f"Known keys: {', '.join(sorted(DEFAULTS))}.",
                id="llm_conversations.E002",
            )
        )
    kinds = (
        (POSITIVE_INTEGERS, is_positive_integer, "a positive integer", "llm_conversations.E003"),
        (
            OPTIONAL_DURATIONS,
            is_optional_finite_positive_number,
            "a positive number of seconds or None",
            "llm_conversations.E005",
        ),
        (
            DURATIONS,
            is_finite_positive_number,
            "a positive number of seconds",
            "llm_conversations.E005",
        ),
        (
            NON_NEGATIVE_INTEGERS,
            is_non_negative_integer,
            "a non-negative integer",
            "llm_conversations.E006",
        ),
        (
            OPTIONAL_POSITIVE_INTEGERS,
            is_optional_positive_integer,
            "a positive integer or None",
            "llm_conversations.E007",
        ),
    )
    for keys, valid, expected, check_id in kinds:
        for key in keys:
            errors += setting_errors(key, valid, expected, check_id)
    limit = raw_setting("MAX_ITERATIONS_LIMIT")
    default = raw_setting("MAX_ITERATIONS")
    if isinstance(limit, int) and isinstance(default, int) and default > limit:
        errors.append(
            Error(
                "LLM_CONVERSATIONS['MAX_ITERATIONS'] exceeds 'MAX_ITERATIONS_LIMIT'.",
                hint=f"{default} > {limit}.",
                id="llm_conversations.E004",
            )
        )
    for name in BOOLEANS:
        value = raw_setting(name)
        if not isinstance(value, bool):
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS[{name!r}] must be True or False; got {value!r}.",
                    hint="A string such as 'false' would count as true.",
                    id="llm_conversations.E008",
                )
            )
    return errors
