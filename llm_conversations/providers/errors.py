"""Typed provider errors, all under :class:`ProviderError`.

Messages are built from the provider's reply with the API key redacted, so an
error can be logged or shown to staff as is. The classes live in
:mod:`llm_conversations.exceptions` under the library's one root;
:class:`ErrorReports`, mixed into ``Provider``, picks the class and the message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar, Protocol

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
    "ErrorReports",
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


class _Reporter(Protocol):
    """What :class:`ErrorReports` needs of the provider it is mixed into."""

    backend: ClassVar[str]

    def error_message(self, data: object) -> str | None: ...

    def error_class(self, status: int, data: object) -> type[ProviderError]: ...

    def error_text(self, text: str) -> str: ...


class ErrorReports:
    """Mixed into :class:`~llm_conversations.providers.base.Provider`: the typed
    error for what a provider said went wrong, in an error body or in a stream."""

    def error_message(self, data: object) -> str | None:
        """The provider's own explanation in an error body."""
        if isinstance(data, Mapping):
            error = data.get("error")
            nested = error.get("message") if isinstance(error, Mapping) else None
            if isinstance(nested, str):
                return nested
            if isinstance(error, str):
                return error
            message = data.get("message")
            if isinstance(message, str):
                return message
        return None

    def error_class(self, status: int, data: object) -> type[ProviderError]:
        """The exception type for an HTTP error status."""
        if status in (401, 403):
            return AuthenticationError
        if status == 429:
            return RateLimitError
        if status >= 500:
            return ProviderUnavailableError
        return InvalidRequestError

    def stream_ended_early(self: _Reporter, marker: str) -> ProviderUnavailableError:
        """The error for a stream that closed before ``marker``; its partial reply is dropped."""
        return ProviderUnavailableError(
            f"{self.backend}: the stream ended early, before {marker}; "
            "the partial reply was discarded.",
            provider=self.backend,
        )

    def stream_error(self: _Reporter, data: object) -> ProviderError:
        """An error object that arrived inside a stream, classed by what it says it is.

        An HTTP-like numeric ``code`` (OpenRouter, Gemini) is classed as that
        status would be; otherwise the error's ``type`` or ``status`` word
        (OpenAI, Anthropic, Gemini), and what names nothing known is the
        provider being unavailable (retryable).
        """
        message = self.error_text(self.error_message(data) or json.dumps(data))
        error = data.get("error") if isinstance(data, Mapping) else None
        details = error if isinstance(error, Mapping) else {}
        code = details.get("code")
        kind = details.get("type") or details.get("status")
        if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600:
            cls = self.error_class(code, data)
        else:
            cls = stream_error_class(kind if isinstance(kind, str) else code)
        named = kind if isinstance(kind, str) and kind else "an error"
        return cls(
            f"{self.backend} reported {named} in the stream: {message}",
            provider=self.backend,
            provider_message=message,
        )
