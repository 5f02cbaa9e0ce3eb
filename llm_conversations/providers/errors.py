"""Typed provider errors, all under :class:`ProviderError`.

Messages are built from the provider's reply with the API key redacted, so an
error can be logged or shown to staff as is. The classes live in
:mod:`llm_conversations.exceptions` under the library's one root.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from llm_conversations.exceptions import (
    AuthenticationError,
    InvalidRequestError,
    InvalidResponseError,
    LLMConversationsError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailableError,
    RateLimitError,
)

__all__ = [
    "AuthenticationError",
    "InvalidRequestError",
    "InvalidResponseError",
    "ProviderError",
    "ProviderNotConfigured",
    "ProviderTimeout",
    "ProviderUnavailableError",
    "RateLimitError",
]


class ProviderNotConfigured(LLMConversationsError, ImproperlyConfigured, LookupError):
    """``get_provider()`` was asked for a name that is not in ``PROVIDERS``."""

    def __init__(self, message: str) -> None:
        super().__init__("unknown_provider", message, field="provider")
