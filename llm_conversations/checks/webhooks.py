"""E080, E081: ``WEBHOOKS`` and ``WEBHOOK_ALLOWED_HOSTS``; an endpoint's secret is never quoted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage, Error

from llm_conversations.conf import raw_setting
from llm_conversations.runs.webhooks.endpoints import endpoint_problems

__all__ = ["check_webhooks"]


def check_webhooks(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E080 ``WEBHOOKS`` and each endpoint of it, E081 ``WEBHOOK_ALLOWED_HOSTS``."""
    errors: list[CheckMessage] = []
    hooks = raw_setting("WEBHOOKS")
    if not isinstance(hooks, Mapping):
        # Not quoted: the value may hold a secret.
        message = f"LLM_CONVERSATIONS['WEBHOOKS'] must be a dict of endpoints; got {type(hooks).__name__}."
        return [Error(message, id="llm_conversations.E080")]
    for name, entry in hooks.items():
        if not isinstance(entry, Mapping) or not set(entry) <= {"URL", "SECRET", "EVENTS"}:
            problems = ["a dict with URL, SECRET and optionally EVENTS"]
        else:
            problems = endpoint_problems(
                entry.get("URL"), entry.get("SECRET"), entry.get("EVENTS", [])
            )
        errors += [
            Error(
                f"LLM_CONVERSATIONS['WEBHOOKS'][{name!r}]: {problem}.", id="llm_conversations.E080"
            )
            for problem in problems
        ]
    hosts = raw_setting("WEBHOOK_ALLOWED_HOSTS")
    if hosts is not None and (
        not isinstance(hosts, list | tuple) or not all(isinstance(h, str) and h for h in hosts)
    ):
        errors.append(
            Error(
                "LLM_CONVERSATIONS['WEBHOOK_ALLOWED_HOSTS'] must be None or a list of host "
                f"names; got {hosts!r}.",
                hint="None lets webhooks reach public addresses only.",
                id="llm_conversations.E081",
            )
        )
    return errors
