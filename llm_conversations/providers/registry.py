"""The registry of built providers: one instance per ``PROVIDERS`` entry per process.

:func:`get_provider` looks an entry up and builds it once (:func:`build_provider`,
which refuses an entry :func:`~llm_conversations.providers.entries.provider_entry_problems`
finds an error in); :func:`circuit_breaker` keeps each entry's breaker and
:func:`fallback_chain` the entries a call to one goes to. Both are forgotten
when ``LLM_CONVERSATIONS`` changes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from llm_conversations.conf import conf
from llm_conversations.core.fitting import ContextStrategy

from .backends import backend_class
from .base import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_RETRY_AFTER,
    DEFAULT_TIMEOUT,
    Provider,
)
from .circuit_breaker import CircuitBreaker
from .entries import breaker_settings, fallbacks_of, provider_entry_problems
from .errors import ProviderNotConfigured

__all__ = [
    "build_provider",
    "circuit_breaker",
    "clear_provider_cache",
    "fallback_chain",
    "get_provider",
]

_cache: dict[str, Provider] = {}
_breakers: dict[str, CircuitBreaker] = {}
_lock = threading.Lock()


def fallback_chain(name: str) -> list[str]:
    """The entries tried for a call to ``name``: itself, then its ``FALLBACKS`` in order,
    each followed by its own, every entry once.

    Raises ``ImproperlyConfigured`` when a fallback is not an entry (E044).
    """
    providers = conf.PROVIDERS
    chain: list[str] = []

    def visit(entry_name: str) -> None:
        if entry_name in chain:
            return
        if entry_name not in providers:
            raise ImproperlyConfigured(
                f"LLM_CONVERSATIONS['PROVIDERS'] has no entry {entry_name!r}, named as a fallback."
            )
        chain.append(entry_name)
        for fallback in fallbacks_of(providers[entry_name]):
            visit(fallback)

    visit(name)
    return chain


def circuit_breaker(name: str) -> CircuitBreaker | None:
    """The circuit breaker of entry ``name`` (``None`` without ``CIRCUIT_BREAKER``).

    One per entry per process, kept until ``LLM_CONVERSATIONS`` changes.
    """
    with _lock:
        breaker = _breakers.get(name)
        if breaker is not None:
            return breaker
        settings = breaker_settings(conf.PROVIDERS.get(name, {}).get("CIRCUIT_BREAKER"))
        if settings is None:
            return None
        breaker = _breakers[name] = CircuitBreaker(settings)
        return breaker


def build_provider(config: Mapping[str, Any], name: str | None = None) -> Provider:
    """A new provider from one ``PROVIDERS`` entry (``name`` is its key, for messages).

    Raises ``ImproperlyConfigured`` with the message of the first error that
    :func:`provider_entry_problems` finds, the one ``manage.py check`` shows.
    """
    for problem in provider_entry_problems(config, name):
        if problem.is_error:
            raise ImproperlyConfigured(problem.message)
    cls = backend_class(config["BACKEND"])
    return cls(
        model=config["MODEL"],
        api_key=config.get("API_KEY") or None,
        base_url=config.get("BASE_URL") or None,
        timeout=config.get("TIMEOUT", DEFAULT_TIMEOUT),
        connect_timeout=config.get("CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT),
        max_retries=config.get("MAX_RETRIES", DEFAULT_MAX_RETRIES),
        max_retry_after=config.get("MAX_RETRY_AFTER", DEFAULT_MAX_RETRY_AFTER),
        models=config.get("MODELS", ()),
        streams=config.get("STREAM", True),
        compaction=config.get("CONTEXT_STRATEGY") == ContextStrategy.COMPACT,
        **dict(config.get("OPTIONS", {})),
    )


def get_provider(name: str | None = None) -> Provider:
    """The provider configured as ``name`` (``DEFAULT_PROVIDER`` when ``None``).

    Instances are built once per process and reused, so their connection
    pools are shared; the cache is cleared when ``LLM_CONVERSATIONS`` changes.
    """
    key = name if name is not None else conf.DEFAULT_PROVIDER
    with _lock:
        provider = _cache.get(key)
        if provider is not None:
            return provider
        try:
            providers = conf.PROVIDERS
        except (TypeError, ValueError):
            raise ImproperlyConfigured("LLM_CONVERSATIONS['PROVIDERS'] must be a dict.") from None
        if key not in providers:
            configured = ", ".join(sorted(map(str, providers))) or "none"
            raise ProviderNotConfigured(
                f"No provider named {key!r} in LLM_CONVERSATIONS['PROVIDERS'] "
                f"(configured: {configured})."
            )
        provider = _cache[key] = build_provider(providers[key], key)
        return provider


def clear_provider_cache() -> None:
    """Close and forget built providers and their circuit breakers; the next
    ``get_provider()`` builds afresh."""
    with _lock:
        providers = list(_cache.values())
        _cache.clear()
        _breakers.clear()
    for provider in providers:
        provider.close()


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "LLM_CONVERSATIONS":
        clear_provider_cache()


setting_changed.connect(_on_setting_changed, dispatch_uid="llm_conversations.providers.cache")
