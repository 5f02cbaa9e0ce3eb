"""Building providers from settings, and the per-process instance cache."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from llm_conversations.conf import conf

from .anthropic import AnthropicProvider
from .base import Provider
from .echo import EchoProvider
from .errors import ProviderNotConfigured
from .gemini import GeminiProvider
from .ollama import OllamaProvider
from .openai import OpenAIProvider

__all__ = [
    "BACKENDS",
    "ENTRY_KEYS",
    "HOSTED_BACKENDS",
    "backend_class",
    "build_provider",
    "clear_provider_cache",
    "get_provider",
]

BACKENDS: dict[str, type[Provider]] = {
    "openai": OpenAIProvider,
    "anthropic": AnthropicProvider,
    "gemini": GeminiProvider,
    "ollama": OllamaProvider,
    "echo": EchoProvider,
}
HOSTED_BACKENDS = frozenset({"openai", "anthropic", "gemini"})
ENTRY_KEYS = frozenset(
    {"BACKEND", "MODEL", "API_KEY", "BASE_URL", "TIMEOUT", "MAX_RETRIES", "OPTIONS"}
)

_cache: dict[str, Provider] = {}
_lock = threading.Lock()


def backend_class(backend: object) -> type[Provider]:
    """The class for a ``BACKEND`` value: a short name or a dotted path."""
    if isinstance(backend, str) and backend in BACKENDS:
        return BACKENDS[backend]
    if not isinstance(backend, str) or "." not in backend:
        raise ImproperlyConfigured(
            f"Unknown provider BACKEND {backend!r}; use one of "
            f"{', '.join(sorted(BACKENDS))} or a dotted path to a Provider subclass."
        )
    try:
        cls = import_string(backend)
    except ImportError as exc:
        raise ImproperlyConfigured(f"Cannot import provider BACKEND {backend!r}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Provider)):
        raise ImproperlyConfigured(f"Provider BACKEND {backend!r} is not a Provider subclass.")
    return cls


def build_provider(config: Mapping[str, Any]) -> Provider:
    """A new provider from one ``PROVIDERS`` entry."""
    if not isinstance(config, Mapping):
        raise ImproperlyConfigured("Each LLM_CONVERSATIONS['PROVIDERS'] entry must be a dict.")
    cls = backend_class(config.get("BACKEND"))
    model = config.get("MODEL")
    if not isinstance(model, str) or not model:
        raise ImproperlyConfigured("A provider entry needs a non-empty MODEL.")
    options = config.get("OPTIONS") or {}
    if not isinstance(options, Mapping):
        raise ImproperlyConfigured("A provider entry's OPTIONS must be a dict.")
    return cls(
        model=model,
        api_key=config.get("API_KEY") or None,
        base_url=config.get("BASE_URL") or None,
        timeout=config.get("TIMEOUT", 60.0),
        max_retries=config.get("MAX_RETRIES", 2),
        **dict(options),
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
        provider = _cache[key] = build_provider(providers[key])
        return provider


def clear_provider_cache() -> None:
    """Close and forget built providers; the next ``get_provider()`` builds afresh."""
    with _lock:
        providers = list(_cache.values())
        _cache.clear()
    for provider in providers:
        provider.close()


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "LLM_CONVERSATIONS":
        clear_provider_cache()


setting_changed.connect(_on_setting_changed, dispatch_uid="llm_conversations.providers.cache")
