"""The backends a ``PROVIDERS`` entry's ``BACKEND`` names: the adapter classes by
short name, and :func:`backend_class` for a name or a dotted path."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .anthropic import AnthropicProvider
from .base import Provider
from .echo import EchoProvider
from .gemini import GeminiProvider
from .ollama import OllamaProvider
from .openai import OpenAIProvider
from .openai_responses import OpenAIResponsesProvider

__all__ = ["BACKENDS", "HOSTED_BACKENDS", "backend_class"]

BACKENDS: dict[str, type[Provider]] = {
    "openai": OpenAIProvider,
    "openai_responses": OpenAIResponsesProvider,
    "anthropic": AnthropicProvider,
    "gemini": GeminiProvider,
    "ollama": OllamaProvider,
    "echo": EchoProvider,
}
HOSTED_BACKENDS = frozenset({"openai", "openai_responses", "anthropic", "gemini"})


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
