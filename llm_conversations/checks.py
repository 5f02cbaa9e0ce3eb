"""System checks for ``settings.LLM_CONVERSATIONS`` (ids ``llm_conversations.E0NN``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register

from llm_conversations.conf import DEFAULTS, POSITIVE_INTEGERS, user_settings


@register(Tags.compatibility)
def check_settings(**kwargs: Any) -> list[CheckMessage]:
    """E001 not a dict, E002 unknown key, E003 not a positive integer, E004 limits."""
    value = getattr(settings, "LLM_CONVERSATIONS", {})
    if not isinstance(value, Mapping):
        return [
            Error(
                "LLM_CONVERSATIONS must be a dict.",
                hint=f"Got {type(value).__name__}.",
                id="llm_conversations.E001",
            )
        ]
    errors: list[CheckMessage] = []
    for key in sorted(set(value) - set(DEFAULTS)):
        errors.append(
            Error(
                f"LLM_CONVERSATIONS has an unknown key {key!r}.",
                hint=f"Known keys: {', '.join(sorted(DEFAULTS))}.",
                id="llm_conversations.E002",
            )
        )
    for key in POSITIVE_INTEGERS:
        item = value.get(key, DEFAULTS[key])
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS[{key!r}] must be a positive integer; got {item!r}.",
                    id="llm_conversations.E003",
                )
            )
    data = user_settings()
    limit = data.get("MAX_ITERATIONS_LIMIT", DEFAULTS["MAX_ITERATIONS_LIMIT"])
    default = data.get("MAX_ITERATIONS", DEFAULTS["MAX_ITERATIONS"])
    if isinstance(limit, int) and isinstance(default, int) and default > limit:
        errors.append(
            Error(
                "LLM_CONVERSATIONS['MAX_ITERATIONS'] exceeds 'MAX_ITERATIONS_LIMIT'.",
                hint=f"{default} > {limit}.",
                id="llm_conversations.E004",
            )
        )
    return errors
