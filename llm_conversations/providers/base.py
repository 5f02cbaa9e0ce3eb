"""The provider base class: one pooled httpx client, retries, key redaction.

Subclasses implement four hooks: ``build_request`` (path and JSON body),
``auth_headers``, ``parse_response`` and ``parse_stream``. Everything about
sending, retrying, deadlines, size caps and turning HTTP failures into typed
errors lives here once.

Deadlines: ``timeout`` bounds a whole non-streamed attempt (connect, send and
the whole body, checked as bytes arrive) and, for a stream, the arrival of the
response headers; after that a stream may fall silent for at most ``timeout``
between two pieces. ``connect_timeout`` bounds the connection alone.
"""

from __future__ import annotations

import codecs
import json
import logging
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

import httpx

from llm_conversations.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.conf import conf
from llm_conversations.messages import (
    ChatMessage,
    InvalidMessage,
    MessageInput,
    Role,
    ToolCall,
    as_chat_messages,
)
from llm_conversations.text import storable_text
from llm_conversations.tool_specs import ToolSpec

from ._wire import ToolInput, as_tool_specs, storable_call
from .errors import (
    AuthenticationError,
    InvalidRequestError,
    InvalidResponseError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailableError,
    RateLimitError,
)
from .events import StreamEvent, TextDelta

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RETRY_AFTER",
    "DEFAULT_TIMEOUT",
    "ERROR_TEXT_LIMIT",
    "REDACTED",
    "Provider",
    "backoff_delay",
    "parse_retry_after",
]

logger = logging.getLogger("llm_conversations.providers")

REDACTED = "[redacted]"
BACKOFF_BASE = 0.5
BACKOFF_MAX = 8.0
# The defaults of a PROVIDERS entry's TIMEOUT (seconds per attempt),
# CONNECT_TIMEOUT, MAX_RETRIES and MAX_RETRY_AFTER (the longest Retry-After
# slept through inside a request); the registry imports them rather than
# repeating the numbers.
DEFAULT_TIMEOUT = 60.0
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_RETRY_AFTER = 60.0
# Provider text quoted in an error is cut to this many characters, after the
# key is redacted (cutting first could leave part of the key behind).
ERROR_TEXT_LIMIT = 500
# A body may hold its reply's text as JSON: up to 4 UTF-8 bytes per character
# plus the envelope. A stream repeats its envelope around every few
# characters (an OpenAI chunk is ~200 bytes for one token), so it gets more.
BODY_BYTES_PER_CHAR = 4
STREAM_BYTES_PER_CHAR = 64
BODY_ENVELOPE_BYTES = 64 * 1024
_LINE_END = re.compile(r"\r\n|\r|\n")


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


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """What one call sends: the messages, the tools offered, options, and whether to stream.

    ``messages`` leaves out empty assistant turns (see :meth:`Provider.complete`).
    """

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...]
    options: dict[str, Any]
    stream: bool


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
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
        max_reply_chars: int | None = None,
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
        # Connecting is part of an attempt, so it never gets longer than one.
        self.connect_timeout = min(float(connect_timeout), self.timeout)
        self.max_retries = max(0, int(max_retries))
        self.max_retry_after = float(max_retry_after)
        self._max_reply_chars = max_reply_chars
        self.options: dict[str, Any] = dict(options)
        self._sleep = sleep or time.sleep
        self._owns_client = http_client is None and self.uses_http
        self._client: httpx.Client | None = http_client
        if self._owns_client:
            self._client = httpx.Client(timeout=self._timeouts())

    @property
    def max_reply_chars(self) -> int:
        """The longest reply text or arguments text accepted.

        The constructor's ``max_reply_chars``, else the ``MAX_REPLY_CHARS``
        setting, read per call so ``override_settings`` applies.
        """
        if self._max_reply_chars is not None:
            return self._max_reply_chars
        return conf.MAX_REPLY_CHARS

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
        return self.send(self._request(messages, tools, options, stream=False))

    def stream(
        self,
        messages: Iterable[MessageInput],
        *,
        tools: Iterable[ToolInput] | None = None,
        **options: Any,
    ) -> Iterator[StreamEvent]:
        """Send the conversation and yield events as the reply arrives.

        Failures before the first byte are retried like :meth:`complete`;
        a stream broken halfway, or ending without its protocol's end marker,
        raises :class:`ProviderUnavailableError`. Text beyond
        ``max_reply_chars`` raises :class:`InvalidResponseError` at once.
        """
        return self.send_stream(self._request(messages, tools, options, stream=True))

    def send(self, request: CompletionRequest) -> CompletionResponse:
        """Make the call :meth:`complete` describes (a hook for providers without HTTP)."""
        path, body = self.build_request(request)
        response, content = self._post(path, body, stream=False)
        data = self._decode(response, content)
        try:
            return self.parse_response(data, request.messages)
        except (KeyError, IndexError, TypeError, AttributeError, InvalidMessage) as exc:
            raise self._bad_response(exc) from None

    def send_stream(self, request: CompletionRequest) -> Iterator[StreamEvent]:
        """Make the call :meth:`stream` describes (a hook for providers without HTTP)."""
        path, body = self.build_request(request)
        response, _ = self._post(path, body, stream=True)
        text_chars = 0
        try:
            for event in self.parse_stream(response, request.messages):
                if isinstance(event, TextDelta):
                    # Checked as text arrives, so an endless reply stops being read.
                    text_chars += len(event.text)
                    self.check_size(text_chars, "text")
                yield event
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

    def _request(
        self,
        messages: Iterable[MessageInput],
        tools: Iterable[ToolInput] | None,
        options: Mapping[str, Any],
        *,
        stream: bool,
    ) -> CompletionRequest:
        # An empty reply (a refusal, a cut-off) is kept in the conversation but
        # tells a model nothing, and several protocols refuse an empty turn.
        chat = as_chat_messages(messages)
        sent = tuple(m for m in chat if m.content or m.tool_calls or m.role is not Role.ASSISTANT)
        return CompletionRequest(
            sent, tuple(as_tool_specs(tools)), {**self.options, **options}, stream
        )

    # Hooks ----------------------------------------------------------------

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
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

    def error_text(self, text: str) -> str:
        """Provider text for an error message: the key redacted, then cut short."""
        return self.redact(text)[:ERROR_TEXT_LIMIT]

    def check_size(self, chars: int, what: str) -> None:
        """Raise :class:`InvalidResponseError` when ``chars`` exceeds ``max_reply_chars``."""
        if chars > self.max_reply_chars:
            raise InvalidResponseError(
                f"{self.backend}: the reply's {what} is longer than MAX_REPLY_CHARS "
                f"({self.max_reply_chars} characters).",
                provider=self.backend,
            )

    def stream_ended_early(self, marker: str) -> ProviderUnavailableError:
        """The error for a stream that closed before ``marker``; its partial reply is dropped."""
        return ProviderUnavailableError(
            f"{self.backend}: the stream ended early, before {marker}; "
            "the partial reply was discarded.",
            provider=self.backend,
        )

    def lines(self, response: httpx.Response) -> Iterator[str]:
        """The text lines of a streamed body, its size capped.

        Lines end at CR, LF or CRLF (what both SSE and NDJSON allow). More
        than ``STREAM_BYTES_PER_CHAR * max_reply_chars`` decoded bytes raise
        :class:`InvalidResponseError`, so a runaway stream is not read whole.
        """
        cap = STREAM_BYTES_PER_CHAR * self.max_reply_chars + BODY_ENVELOPE_BYTES
        decoder = codecs.getincrementaldecoder(response.encoding or "utf-8")(errors="replace")
        total = 0
        pending = ""
        for chunk in response.iter_bytes():
            total += len(chunk)
            if total > cap:
                raise self._too_large(cap)
            # Only the new text can end a line (and a CR held back from before).
            scan_from = max(0, len(pending) - 1)
            pending += decoder.decode(chunk)
            # A trailing CR may be the first half of a CRLF split across chunks.
            end = len(pending) - 1 if pending.endswith("\r") else len(pending)
            start = 0
            for match in _LINE_END.finditer(pending, scan_from, end):
                yield pending[start : match.start()]
                start = match.end()
            pending = pending[start:]
        pending += decoder.decode(b"", final=True)
        if pending:
            yield from _LINE_END.split(pending.removesuffix("\r"))

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
        sanitized: bool = False,
    ) -> CompletionResponse:
        """A parsed reply from this provider: ``raw`` redacted, ``model`` defaulted.

        Every adapter builds its replies here, so no raw body escapes
        redaction, no reply exceeds ``max_reply_chars`` (text, or any call's
        arguments text) and none holds what a database cannot store.
        ``StreamAccumulator`` already made its text and calls storable and
        says so in ``sanitized``; this applies the same rules again for
        replies built another way.
        """
        clean_content = storable_text(content)
        sanitized = sanitized or clean_content != content
        calls = []
        for call in tool_calls:
            arguments = call.raw_arguments if call.malformed else call.arguments
            clean, changed = storable_call(call.id, call.name, arguments)
            if changed:
                call, sanitized = clean, True
            calls.append(call)
        self.check_size(len(clean_content), "text")
        for call in calls:
            self.check_size(len(call.arguments_json), f"arguments of {call.name!r}")
        return CompletionResponse(
            content=clean_content,
            tool_calls=tuple(calls),
            finish_reason=finish_reason,
            usage=usage,
            model=model or self.model,
            provider=self.backend,
            raw=self.redact_data(raw),
            raw_finish_reason=raw_finish_reason,
            sanitized=sanitized,
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

    def _timeouts(self) -> httpx.Timeout:
        # Each wait for the network (read, write, pool) is bounded by TIMEOUT;
        # the attempt as a whole is bounded in _post and _read_body.
        return httpx.Timeout(self.timeout, connect=self.connect_timeout)

    def _post(
        self, path: str, body: dict[str, Any], *, stream: bool
    ) -> tuple[httpx.Response, bytes]:
        """Send with retries: the response, and its body unless it is an open stream.

        Bodies are always received as a stream so their size is capped and the
        attempt's deadline checked as bytes arrive.
        """
        assert self._client is not None, "this provider makes no HTTP calls"
        url = self.base_url + path
        headers = {"accept": "text/event-stream" if stream else "application/json"}
        headers.update(self.auth_headers())
        attempt = 0
        while True:
            request = self._client.build_request(
                "POST", url, json=body, headers=headers, timeout=self._timeouts()
            )
            started = time.monotonic()
            error: ProviderError
            try:
                response = self._client.send(request, stream=True)
                if stream and response.status_code < 400:
                    if time.monotonic() - started > self.timeout:
                        # The headers trickled in past the deadline for the first byte.
                        response.close()
                        raise self._deadline_passed()
                    return response, b""
                content = self._read_body(response, started)
            except httpx.TimeoutException as exc:
                error = ProviderTimeout(
                    f"{self.backend}: no answer within {self.timeout:g}s ({type(exc).__name__}).",
                    provider=self.backend,
                )
            except httpx.TransportError as exc:
                # httpx messages name hosts, not headers; redact anyway.
                detail = self.error_text(str(exc)) or type(exc).__name__
                error = ProviderUnavailableError(
                    f"{self.backend}: connection failed: {detail}", provider=self.backend
                )
            except ProviderTimeout as exc:
                error = exc
            else:
                if response.status_code < 400:
                    return response, content
                error = self._error_from_response(response, content)
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

    def _read_body(self, response: httpx.Response, started: float) -> bytes:
        """The whole (decoded) body, within the attempt's deadline and the size cap."""
        cap = BODY_BYTES_PER_CHAR * self.max_reply_chars + BODY_ENVELOPE_BYTES
        content = bytearray()
        try:
            for chunk in response.iter_bytes():
                content += chunk
                if len(content) > cap:
                    raise self._too_large(cap)
                if time.monotonic() - started > self.timeout:
                    raise self._deadline_passed()
        finally:
            response.close()
        return bytes(content)

    def _deadline_passed(self) -> ProviderTimeout:
        return ProviderTimeout(
            f"{self.backend}: the answer took longer than TIMEOUT ({self.timeout:g}s).",
            provider=self.backend,
        )

    def _too_large(self, cap: int) -> InvalidResponseError:
        return InvalidResponseError(
            f"{self.backend}: the response is larger than {cap} bytes, the cap derived "
            f"from MAX_REPLY_CHARS ({self.max_reply_chars}); it was not read further.",
            provider=self.backend,
        )

    def _retry_delay(self, error: ProviderError, attempt: int) -> float | None:
        if not error.retryable or attempt >= self.max_retries:
            return None
        if error.retry_after is not None:
            if error.retry_after > self.max_retry_after:
                raise self._wait_refused(error) from None
            return error.retry_after
        return backoff_delay(attempt)

    def _wait_refused(self, error: ProviderError) -> ProviderError:
        # The same error, saying why it was not retried.
        return type(error)(
            f"{error.message} (the provider asked to wait {error.retry_after:g}s, "
            f"more than MAX_RETRY_AFTER={self.max_retry_after:g}s, so it was not retried)",
            provider=error.provider,
            status_code=error.status_code,
            provider_message=error.provider_message,
            retry_after=error.retry_after,
        )

    def _error_from_response(self, response: httpx.Response, content: bytes) -> ProviderError:
        status = response.status_code
        try:
            data: object = json.loads(content)
        except ValueError:
            data = None
        text = self.error_message(data) or _text(response, content) or response.reason_phrase
        provider_message = self.error_text(text)
        return self.error_class(status, data)(
            f"{self.backend} returned HTTP {status}: {provider_message}",
            provider=self.backend,
            status_code=status,
            provider_message=provider_message,
            retry_after=parse_retry_after(response.headers),
        )

    def _decode(self, response: httpx.Response, content: bytes) -> Mapping[str, Any]:
        try:
            data = json.loads(content)
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
            f"{type(exc).__name__}: {self.error_text(str(exc))}",
            provider=self.backend,
        )

    def stream_error(self, data: object) -> ProviderError:
        """An error object that arrived inside a stream."""
        message = self.error_text(self.error_message(data) or json.dumps(data))
        return ProviderUnavailableError(
            f"{self.backend} reported an error in the stream: {message}",
            provider=self.backend,
            provider_message=message,
        )


def _text(response: httpx.Response, content: bytes) -> str:
    return content.decode(response.encoding or "utf-8", errors="replace")
