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
    "stream_error_class",
]


class ProviderNotConfigured(LLMConversationsError, ImproperlyConfigured, LookupError):
    """``get_provider()`` was asked for a name that is not in ``PROVIDERS``."""

    def __init__(self, message: str) -> None:
        super().__init__("unknown_provider", message, field="provider")


# Words in-stream errors use for their kind (OpenAI's type and code, Anthropic's
# type, Google's status), by the error they are.
_STREAM_ERROR_WORDS: tuple[tuple[tuple[str, ...], type[ProviderError]], ...] = (
    (("rate_limit", "resource_exhausted", "insufficient_quota"), RateLimitError),
    (
        ("authentication", "permission", "unauthenticated", "invalid_api_key"),
        AuthenticationError,
    ),
    (
        (
            "invalid_request",
            "invalid_argument",
            "failed_precondition",
            "context_length",
            "invalid_prompt",
        ),
        InvalidRequestError,
    ),
)


def stream_error_class(kind: object) -> type[ProviderError]:
    """The error an in-stream error's kind word names; unknown words: unavailable."""
    word = kind.lower() if isinstance(kind, str) else ""
    for markers, cls in _STREAM_ERROR_WORDS:
        if any(marker in word for marker in markers):
            return cls
    return ProviderUnavailableError
