"""The provider base class: one pooled httpx client, retries, key redaction.

Subclasses implement four hooks: ``build_request`` (path and JSON body),
``auth_headers``, ``parse_response`` and ``parse_stream``. Everything about
sending, retrying and turning HTTP failures into typed errors lives here once.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

import httpx

from llm_conversations.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.messages import (
    ChatMessage,
    InvalidMessage,
    MessageInput,
    ToolCall,
    as_chat_messages,
)
from llm_conversations.tool_specs import ToolSpec

from ._wire import ToolInput, as_tool_specs
from .errors import (
    AuthenticationError,
    InvalidRequestError,
    InvalidResponseError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailableError,
    RateLimitError,
)
from .events import StreamEvent

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "REDACTED",
    "Provider",
    "backoff_delay",
    "parse_retry_after",
]

logger = logging.getLogger("llm_conversations.providers")

REDACTED = "[redacted]"
BACKOFF_BASE = 0.5
BACKOFF_MAX = 8.0
# A longer Retry-After than this is not slept through inside a request.
MAX_RETRY_AFTER = 60.0
# The defaults of a PROVIDERS entry's TIMEOUT (seconds per attempt) and
# MAX_RETRIES; the registry imports them rather than repeating the numbers.
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2


def backoff_delay(attempt: int) -> float:
    """Exponential backoff with jitter: half fixed, half random, capped."""
    ceiling = min(BACKOFF_MAX, BACKOFF_BASE * 2**attempt)
    return float(ceiling / 2 + random.uniform(0, ceiling / 2))


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


class Provider:
    """One configured model behind one wire protocol.

    ``options`` are default request options, overridden per call by the
    keyword arguments of :meth:`complete` and :meth:`stream`. ``sleep`` is the
    function used between retries (tests pass a recorder). Instances are safe
    to share between threads.
    """

    backend: ClassVar[str] = ""
    default_base_url: ClassVar[str] = ""
    uses_http: ClassVar[bool] = True

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx.Client | None = None,
        sleep: Callable[[float], None] | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(f"{type(self).__name__} needs a non-empty model name.")
        self.model = model
        self._api_key = api_key or None
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        self.options: dict[str, Any] = dict(options)
        self._sleep = sleep or time.sleep
        self._owns_client = http_client is None and self.uses_http
        self._client: httpx.Client | None = http_client
        if self._owns_client:
            self._client = httpx.Client(timeout=self.timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the pooled client if this instance created it."""
        if self._owns_client and self._client is not None:
            self._client.close()

    def __enter__(self) -> Provider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # Public API -----------------------------------------------------------

    def complete(
        self,
        messages: Iterable[MessageInput],
        *,
        tools: Iterable[ToolInput] | None = None,
        **options: Any,
    ) -> CompletionResponse:
        """Send the conversation and return the parsed reply."""
        chat = as_chat_messages(messages)
        path, body = self.build_request(
            chat, as_tool_specs(tools), {**self.options, **options}, stream=False
        )
        response = self._post(path, body, stream=False)
        data = self._decode(response)
        try:
            return self.parse_response(data, chat)
        except (KeyError, IndexError, TypeError, AttributeError, InvalidMessage) as exc:
            raise self._bad_response(exc) from None

    def stream(
        self,
        messages: Iterable[MessageInput],
        *,
        tools: Iterable[ToolInput] | None = None,
        **options: Any,
    ) -> Iterator[StreamEvent]:
        """Send the conversation and yield events as the reply arrives.

        Failures before the first byte are retried like :meth:`complete`;
        a stream broken halfway raises :class:`ProviderUnavailableError`.
        """
        chat = as_chat_messages(messages)
        path, body = self.build_request(
            chat, as_tool_specs(tools), {**self.options, **options}, stream=True
        )
        response = self._post(path, body, stream=True)
        try:
            yield from self.parse_stream(response, chat)
        except httpx.TimeoutException:
            raise ProviderTimeout(
                f"{self.backend}: the stream stalled for more than {self.timeout:g}s.",
                provider=self.backend,
            ) from None
        except httpx.TransportError as exc:
            raise ProviderUnavailableError(
                f"{self.backend}: the stream broke ({type(exc).__name__}).",
                provider=self.backend,
            ) from None
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise self._bad_response(exc) from None
        finally:
            response.close()

    # Hooks ----------------------------------------------------------------

    def build_request(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: dict[str, Any],
        *,
        stream: bool,
    ) -> tuple[str, dict[str, Any]]:
        """The URL path (after ``base_url``) and JSON body of one call."""
        raise NotImplementedError

    def auth_headers(self) -> dict[str, str]:
        """Headers that carry the API key (a Bearer token unless overridden).

        Built per request, never stored on the client.
        """
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def parse_response(
        self, data: Mapping[str, Any], messages: Sequence[ChatMessage]
    ) -> CompletionResponse:
        """Read a decoded response body into a :class:`CompletionResponse`."""
        raise NotImplementedError

    def parse_stream(
        self, response: httpx.Response, messages: Sequence[ChatMessage]
    ) -> Iterator[StreamEvent]:
        """Yield events from an open streaming response."""
        raise NotImplementedError

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

    # Redaction ------------------------------------------------------------

    def redact(self, text: str) -> str:
        """``text`` with the API key replaced."""
        if self._api_key and self._api_key in text:
            return text.replace(self._api_key, REDACTED)
        return text

    def completion(
        self,
        *,
        content: str,
        tool_calls: Iterable[ToolCall],
        finish_reason: FinishReason,
        usage: Usage,
        model: str | None,
        raw: Mapping[str, Any],
        raw_finish_reason: str | None,
    ) -> CompletionResponse:
        """A parsed reply from this provider: ``raw`` redacted, ``model`` defaulted.

        Every adapter builds its replies here, so no raw body escapes redaction.
        """
        return CompletionResponse(
            content=content,
            tool_calls=tuple(tool_calls),
            finish_reason=finish_reason,
            usage=usage,
            model=model or self.model,
            provider=self.backend,
            raw=self.redact_data(raw),
            raw_finish_reason=raw_finish_reason,
        )

    def redact_data(self, data: Any) -> Any:
        """A copy of decoded JSON with the API key replaced in every string."""
        if not self._api_key:
            return data
        if isinstance(data, str):
            return self.redact(data)
        if isinstance(data, Mapping):
            return {self.redact(str(k)): self.redact_data(v) for k, v in data.items()}
        if isinstance(data, list):
            return [self.redact_data(item) for item in data]
        return data

    # HTTP -----------------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any], *, stream: bool) -> httpx.Response:
        assert self._client is not None, "this provider makes no HTTP calls"
        url = self.base_url + path
        headers = {"accept": "text/event-stream" if stream else "application/json"}
        headers.update(self.auth_headers())
        attempt = 0
        while True:
            request = self._client.build_request(
                "POST", url, json=body, headers=headers, timeout=self.timeout
            )
            error: ProviderError
            try:
                response = self._client.send(request, stream=stream)
            except httpx.TimeoutException as exc:
                error = ProviderTimeout(
                    f"{self.backend}: no answer within {self.timeout:g}s ({type(exc).__name__}).",
                    provider=self.backend,
                )
            except httpx.TransportError as exc:
                # httpx messages name hosts, not headers; redact anyway.
                detail = self.redact(str(exc)) or type(exc).__name__
                error = ProviderUnavailableError(
                    f"{self.backend}: connection failed: {detail}", provider=self.backend
                )
            else:
                if response.status_code < 400:
                    return response
                if stream:
                    response.read()
                    response.close()
                error = self._error_from_response(response)
            delay = self._retry_delay(error, attempt)
            if delay is None:
                raise error
            attempt += 1
            logger.warning(
                "%s call failed (%s); retry %d of %d in %.2fs.",
                self.backend,
                error,
                attempt,
                self.max_retries,
                delay,
            )
            self._sleep(delay)

    def _retry_delay(self, error: ProviderError, attempt: int) -> float | None:
        if not error.retryable or attempt >= self.max_retries:
            return None
        if error.retry_after is not None:
            return None if error.retry_after > MAX_RETRY_AFTER else error.retry_after
        return backoff_delay(attempt)

    def _error_from_response(self, response: httpx.Response) -> ProviderError:
        status = response.status_code
        try:
            data: object = response.json()
        except ValueError:
            data = None
        text = self.error_message(data) or response.text[:500] or response.reason_phrase
        provider_message = self.redact(text)
        return self.error_class(status, data)(
            f"{self.backend} returned HTTP {status}: {provider_message}",
            provider=self.backend,
            status_code=status,
            provider_message=provider_message,
            retry_after=parse_retry_after(response.headers),
        )

    def _decode(self, response: httpx.Response) -> Mapping[str, Any]:
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, Mapping):
            raise InvalidResponseError(
                f"{self.backend} returned a body that is not a JSON object.",
                provider=self.backend,
                status_code=response.status_code,
            )
        return data

    def _bad_response(self, exc: Exception) -> InvalidResponseError:
        return InvalidResponseError(
            f"{self.backend} returned an unreadable response: "
            f"{type(exc).__name__}: {self.redact(str(exc))}",
            provider=self.backend,
        )

    def stream_error(self, data: object) -> ProviderError:
        """An error object that arrived inside a stream."""
        message = self.redact(self.error_message(data) or json.dumps(data)[:500])
        return ProviderUnavailableError(
            f"{self.backend} reported an error in the stream: {message}",
            provider=self.backend,
            provider_message=message,
        )
