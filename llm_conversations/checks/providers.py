"""E009-E019, E040-E047, W010, W041: ``PROVIDERS`` and the settings that name its
entries (``DEFAULT_PROVIDER``, ``TITLE_PROVIDER``, ``SUMMARY_PROVIDER``).

The rules of one entry and of fallbacks are the registry's, which
``build_provider()`` applies too, so both say the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage, Error

from llm_conversations.checks.values import as_check_message
from llm_conversations.conf import raw_setting
from llm_conversations.providers.entries import fallback_problems, provider_entry_problems

__all__ = ["check_providers"]


def check_providers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E010 PROVIDERS not a non-empty dict, E015 DEFAULT_PROVIDER unknown, E009
    TITLE_PROVIDER unknown, E042 SUMMARY_PROVIDER unknown or missing, plus each entry."""
    providers = raw_setting("PROVIDERS")
    if not isinstance(providers, Mapping) or not providers:
        return [
            Error(
                "LLM_CONVERSATIONS['PROVIDERS'] must be a non-empty dict of name -> settings.",
                hint=f"Got {providers!r}." if not isinstance(providers, Mapping) else None,
                id="llm_conversations.E010",
            )
        ]
    errors: list[CheckMessage] = []
    default = raw_setting("DEFAULT_PROVIDER")
    if default not in providers:
        errors.append(
            Error(
                f"LLM_CONVERSATIONS['DEFAULT_PROVIDER'] is {default!r}, not a key of PROVIDERS.",
                hint=f"Configured: {', '.join(sorted(map(str, providers)))}.",
                id="llm_conversations.E015",
            )
        )
    title = raw_setting("TITLE_PROVIDER")
    if title is not None and (not isinstance(title, str) or title not in providers):
        errors.append(
            Error(
                f"LLM_CONVERSATIONS['TITLE_PROVIDER'] is {title!r}, "
                "neither None nor a key of PROVIDERS.",
                hint=f"Configured: {', '.join(sorted(map(str, providers)))}.",
                id="llm_conversations.E009",
            )
        )
    errors.extend(_summary_provider_errors(providers))
    for name, entry in providers.items():
        errors.extend(as_check_message(p) for p in provider_entry_problems(entry, str(name)))
    errors.extend(as_check_message(p) for p in fallback_problems(providers))
    return errors


def _summary_provider_errors(providers: Mapping[Any, Any]) -> list[CheckMessage]:
    """E042: SUMMARY_PROVIDER unknown, or missing while an entry summarizes."""
    summary = raw_setting("SUMMARY_PROVIDER")
    configured = ", ".join(sorted(map(str, providers)))
    if summary is not None and (not isinstance(summary, str) or summary not in providers):
        return [
            Error(
                f"LLM_CONVERSATIONS['SUMMARY_PROVIDER'] is {summary!r}, "
                "neither None nor a key of PROVIDERS.",
                hint=f"Configured: {configured}.",
                id="llm_conversations.E042",
            )
        ]
    summarizing = [
        str(name)
        for name, entry in providers.items()
        if isinstance(entry, Mapping) and entry.get("CONTEXT_STRATEGY") == "summarize"
    ]
    if summary is None and summarizing:
        return [
            Error(
                f"PROVIDERS entries {', '.join(map(repr, summarizing))} use the 'summarize' "
                "CONTEXT_STRATEGY, but LLM_CONVERSATIONS['SUMMARY_PROVIDER'] is not set.",
                hint=f"Name the entry that writes summaries; configured: {configured}.",
                id="llm_conversations.E042",
            )
        ]
    return []
