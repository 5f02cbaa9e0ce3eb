"""System checks for ``LLM_CONVERSATIONS['PROVIDERS']`` (ids ``E010``-``E018``, ``W010``).

Importing this module registers :func:`check_providers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured

from llm_conversations.conf import DEFAULTS, user_settings

from .registry import ENTRY_KEYS, HOSTED_BACKENDS, backend_class

__all__ = ["check_provider_entry", "check_providers"]


def _id(code: str) -> str:
    return f"llm_conversations.{code}"


def check_provider_entry(name: str, entry: object) -> list[CheckMessage]:
    """Problems of one ``PROVIDERS`` entry (E011-E014, E016-E018, W010)."""
    where = f"LLM_CONVERSATIONS['PROVIDERS'][{name!r}]"
    if not isinstance(entry, Mapping):
        return [Error(f"{where} must be a dict.", id=_id("E011"))]
    errors: list[CheckMessage] = []
    backend = entry.get("BACKEND")
    try:
        backend_class(backend)
    except ImproperlyConfigured as exc:
        errors.append(Error(f"{where}: {exc}", id=_id("E012")))
    model = entry.get("MODEL")
    if not isinstance(model, str) or not model:
        errors.append(
            Error(f"{where} needs a non-empty MODEL.", hint="e.g. 'gpt-4o-mini'.", id=_id("E013"))
        )
    # An OpenAI-compatible server at a custom BASE_URL may need no key.
    needs_key = backend in HOSTED_BACKENDS and not (backend == "openai" and entry.get("BASE_URL"))
    if needs_key and not entry.get("API_KEY"):
        errors.append(
            Error(
                f"{where} uses the hosted {backend!r} backend but has no API_KEY.",
                hint="Read it from the environment, e.g. os.environ['OPENAI_API_KEY'].",
                id=_id("E014"),
            )
        )
    for key in sorted(set(entry) - ENTRY_KEYS, key=str):
        errors.append(
            Error(
                f"{where} has an unknown key {key!r}.",
                hint=f"Known keys: {', '.join(sorted(ENTRY_KEYS))}.",
                id=_id("E016"),
            )
        )
    timeout = entry.get("TIMEOUT", 60.0)
    retries = entry.get("MAX_RETRIES", 2)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        errors.append(Error(f"{where}['TIMEOUT'] must be a positive number.", id=_id("E017")))
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        errors.append(
            Error(f"{where}['MAX_RETRIES'] must be a non-negative integer.", id=_id("E017"))
        )
    if not isinstance(entry.get("OPTIONS", {}), Mapping):
        errors.append(Error(f"{where}['OPTIONS'] must be a dict.", id=_id("E018")))
    if backend == "echo" and not settings.DEBUG:
        errors.append(
            Warning(
                f"{where} uses the echo backend while DEBUG is off.",
                hint="The echo backend repeats input; configure a real provider in production.",
                id=_id("W010"),
            )
        )
    return errors


@register()
def check_providers(**kwargs: Any) -> list[CheckMessage]:
    """E010 PROVIDERS not a non-empty dict, E015 DEFAULT_PROVIDER unknown, plus each entry."""
    data = user_settings()
    providers = data.get("PROVIDERS", DEFAULTS["PROVIDERS"])
    if not isinstance(providers, Mapping) or not providers:
        return [
            Error(
                "LLM_CONVERSATIONS['PROVIDERS'] must be a non-empty dict of name -> settings.",
                hint=f"Got {providers!r}." if not isinstance(providers, Mapping) else None,
                id=_id("E010"),
            )
        ]
    errors: list[CheckMessage] = []
    default = data.get("DEFAULT_PROVIDER", DEFAULTS["DEFAULT_PROVIDER"])
    if default not in providers:
        errors.append(
            Error(
                f"LLM_CONVERSATIONS['DEFAULT_PROVIDER'] is {default!r}, not a key of PROVIDERS.",
                hint=f"Configured: {', '.join(sorted(map(str, providers)))}.",
                id=_id("E015"),
            )
        )
    for name, entry in providers.items():
        errors.extend(check_provider_entry(str(name), entry))
    return errors
