"""Typed provider errors, all under :class:`ProviderError`.

Messages are built from the provider's reply with the API key redacted, so an
error can be logged or shown to staff as is.
"""

from __future__ import annotations

from typing import ClassVar

from django.core.exceptions import ImproperlyConfigured

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


class ProviderError(Exception):
    """Base class of every failure of a provider call.

    ``provider`` is the backend name (``"openai"``), ``status_code`` the HTTP
    status when there was a response, ``provider_message`` the provider's own
    explanation, ``retry_after`` the seconds the provider asked us to wait.
    ``retryable`` says whether the adapter retries this kind of failure.
    """

    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status_code: int | None = None,
        provider_message: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status_code = status_code
        self.provider_message = provider_message
        self.retry_after = retry_after


class AuthenticationError(ProviderError):
    """The API key is missing, invalid or lacks permission (HTTP 401/403)."""


class RateLimitError(ProviderError):
    """The provider throttled the request (HTTP 429); see ``retry_after``."""

    retryable = True


class InvalidRequestError(ProviderError):
    """The provider refused the request (any other 4xx); not retried."""


class ProviderUnavailableError(ProviderError):
    """A server error (5xx), a connection failure or a broken stream."""

    retryable = True


class ProviderTimeout(ProviderUnavailableError):
    """The provider did not answer within ``timeout`` seconds."""


class InvalidResponseError(ProviderError):
    """The provider answered with a body this adapter cannot read."""


class ProviderNotConfigured(ImproperlyConfigured, LookupError):
    """``get_provider()`` was asked for a name that is not in ``PROVIDERS``."""
