"""HTTP for the adapters: sending with retries, deadlines and size caps, reading
bodies and streams, and turning failed responses into typed errors.

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
from collections.abc import Callable, Iterator, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar, Protocol

import httpx

from .errors import (
    InvalidResponseError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailableError,
)
from .interrupts import NO_INTERRUPT, Interrupt

__all__ = ["HttpTransport", "backoff_delay", "parse_retry_after"]

logger = logging.getLogger("llm_conversations.providers")

BACKOFF_BASE = 0.5
BACKOFF_MAX = 8.0
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


# What can end an attempt before its response is read, besides an interrupt.
_AttemptFailure = httpx.TransportError | httpx.DecodingError | ProviderTimeout


class _Adapter(Protocol):
    """What :class:`HttpTransport` needs of the provider it is mixed into."""

    backend: ClassVar[str]
    base_url: str
    timeout: float
    connect_timeout: float
    max_retries: int
    max_retry_after: float
    _client: httpx.Client | None
    _sleep: Callable[[float], None]

    @property
    def max_reply_chars(self) -> int: ...

    def auth_headers(self) -> dict[str, str]: ...

    def error_message(self, data: object) -> str | None: ...

    def error_class(self, status: int, data: object) -> type[ProviderError]: ...

    def error_text(self, text: str) -> str: ...

    def _too_large(self, cap: int) -> InvalidResponseError: ...

    def _deadline_passed(self) -> ProviderTimeout: ...

    def _opened(
        self, response: httpx.Response, started: float, interrupt: Interrupt
    ) -> httpx.Response: ...

    def _attempt_error(self, exc: _AttemptFailure, interrupt: Interrupt) -> ProviderError: ...

    def _read_body(
        self, response: httpx.Response, started: float, interrupt: Interrupt
    ) -> bytes: ...

    def _lines(self, response: httpx.Response) -> Iterator[str]: ...

    def _timeouts(self, interrupt: Interrupt = ...) -> httpx.Timeout: ...

    def _retry_delay(self, error: ProviderError, attempt: int) -> float | None: ...

    def _wait_refused(self, error: ProviderError) -> ProviderError: ...

    def _error_from_response(self, response: httpx.Response, content: bytes) -> ProviderError: ...


class HttpTransport:
    """Mixed into :class:`~llm_conversations.providers.base.Provider`: its HTTP."""

    def lines(
        self: _Adapter, response: httpx.Response, *, complete: Callable[[], bool] | None = None
    ) -> Iterator[str]:
        """The text lines of a streamed body, its size capped.

        Lines end at CR, LF or CRLF (what both SSE and NDJSON allow). More
        than ``STREAM_BYTES_PER_CHAR * max_reply_chars`` decoded bytes raise
        :class:`InvalidResponseError`, so a runaway stream is not read whole.
        A read that stalls once ``complete()`` holds (the reply and its usage
        arrived, only the end marker is missing) ends the lines instead of
        failing: the reply was paid for.
        """
        interrupt = _interrupt_of(response)
        try:
            yield from self._lines(response)
        except httpx.TimeoutException:
            if complete is None or not complete():
                if interrupt.passed():
                    # The wait was cut to the run's deadline, not to TIMEOUT.
                    interrupt.check()
                raise
            # A whole reply is kept even when the stall ran into the run's deadline.
            logger.warning(
                "%s kept the stream open after the whole reply; ended it after %gs.",
                self.backend,
                self.timeout,
            )

    def _lines(self: _Adapter, response: httpx.Response) -> Iterator[str]:
        cap = STREAM_BYTES_PER_CHAR * self.max_reply_chars + BODY_ENVELOPE_BYTES
        decoder = codecs.getincrementaldecoder(response.encoding or "utf-8")(errors="replace")
        interrupt = _interrupt_of(response)
        total = 0
        pending = ""
        for chunk in response.iter_bytes():
            # Keep-alives and drips arrive as chunks too: a run that must stop stops here.
            interrupt.check()
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

    def _timeouts(self: _Adapter, interrupt: Interrupt = NO_INTERRUPT) -> httpx.Timeout:
        # Each wait for the network (read, write, pool) is bounded by TIMEOUT and
        # by the time the run has left; the attempt as a whole is bounded in
        # _post and _read_body.
        left = interrupt.remaining()
        wait = self.timeout if left is None else max(0.001, min(self.timeout, left))
        return httpx.Timeout(wait, connect=min(self.connect_timeout, wait))

    def _post(
        self: _Adapter,
        path: str,
        body: dict[str, Any],
        *,
        stream: bool,
        interrupt: Interrupt = NO_INTERRUPT,
    ) -> tuple[httpx.Response, bytes]:
        """Send with retries: the response, and its body unless it is an open stream.

        Bodies are always received as a stream so their size is capped and the
        attempt's deadline checked as bytes arrive; ``interrupt`` (the run's
        deadline and stop) is checked before each attempt and as bytes arrive,
        and raises :class:`CallInterrupted`, never retried.
        """
        assert self._client is not None, "this provider makes no HTTP calls"
        url = self.base_url + path
        headers = {"accept": "text/event-stream" if stream else "application/json"}
        headers.update(self.auth_headers())
        attempt = 0
        while True:
            interrupt.check()
            request = self._client.build_request(
                "POST", url, json=body, headers=headers, timeout=self._timeouts(interrupt)
            )
            started = time.monotonic()
            error: ProviderError
            try:
                response = self._client.send(request, stream=True)
                if stream and response.status_code < 400:
                    return self._opened(response, started, interrupt), b""
                content = self._read_body(response, started, interrupt)
            except (httpx.TransportError, httpx.DecodingError, ProviderTimeout) as exc:
                error = self._attempt_error(exc, interrupt)
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

    def _opened(
        self: _Adapter, response: httpx.Response, started: float, interrupt: Interrupt
    ) -> httpx.Response:
        """An open stream whose headers came in time, left for :meth:`lines` to read."""
        if time.monotonic() - started > self.timeout:
            # The headers trickled in past the deadline for the first byte.
            response.close()
            raise self._deadline_passed()
        # Read back by lines(): the stream checks it as its bytes arrive.
        response.extensions[_INTERRUPT] = interrupt
        return response

    def _attempt_error(self: _Adapter, exc: _AttemptFailure, interrupt: Interrupt) -> ProviderError:
        """The typed error of an attempt that failed before its response was read."""
        if isinstance(exc, httpx.TimeoutException):
            # A wait cut to the run's deadline is the run's timeout, not the provider's.
            interrupt.check()
            return ProviderTimeout(
                f"{self.backend}: no answer within {self.timeout:g}s ({type(exc).__name__}).",
                provider=self.backend,
            )
        if isinstance(exc, httpx.DecodingError):
            # A body whose content-encoding does not decode (corrupt gzip): a
            # proxy or the provider failed mid-answer; another attempt may not.
            return ProviderUnavailableError(
                f"{self.backend}: the response body could not be decoded ({type(exc).__name__}).",
                provider=self.backend,
            )
        if isinstance(exc, httpx.TransportError):
            # httpx messages name hosts, not headers; redact anyway.
            detail = self.error_text(str(exc)) or type(exc).__name__
            return ProviderUnavailableError(
                f"{self.backend}: connection failed: {detail}", provider=self.backend
            )
        return exc  # the body's deadline passed (_read_body)

    def _read_body(
        self: _Adapter, response: httpx.Response, started: float, interrupt: Interrupt
    ) -> bytes:
        """The whole (decoded) body, within the attempt's deadline and the size cap."""
        cap = BODY_BYTES_PER_CHAR * self.max_reply_chars + BODY_ENVELOPE_BYTES
        content = bytearray()
        try:
            for chunk in response.iter_bytes():
                interrupt.check()
                content += chunk
                if len(content) > cap:
                    raise self._too_large(cap)
                if time.monotonic() - started > self.timeout:
                    raise self._deadline_passed()
        finally:
            response.close()
        return bytes(content)

    def _deadline_passed(self: _Adapter) -> ProviderTimeout:
        return ProviderTimeout(
            f"{self.backend}: the answer took longer than TIMEOUT ({self.timeout:g}s).",
            provider=self.backend,
        )

    def _too_large(self: _Adapter, cap: int) -> InvalidResponseError:
        return InvalidResponseError(
            f"{self.backend}: the response is larger than {cap} bytes, the cap derived "
            f"from MAX_REPLY_CHARS ({self.max_reply_chars}); it was not read further.",
            provider=self.backend,
        )

    def _retry_delay(self: _Adapter, error: ProviderError, attempt: int) -> float | None:
        if not error.retryable or attempt >= self.max_retries:
            return None
        if error.retry_after is not None:
            if error.retry_after > self.max_retry_after:
                raise self._wait_refused(error) from None
            return error.retry_after
        return backoff_delay(attempt)

    def _wait_refused(self: _Adapter, error: ProviderError) -> ProviderError:
        # The same error, saying why it was not retried.
        return type(error)(
            f"{error.message} (the provider asked to wait {error.retry_after:g}s, "
            f"more than MAX_RETRY_AFTER={self.max_retry_after:g}s, so it was not retried)",
            provider=error.provider,
            status_code=error.status_code,
            provider_message=error.provider_message,
            retry_after=error.retry_after,
        )

    def _error_from_response(
        self: _Adapter, response: httpx.Response, content: bytes
    ) -> ProviderError:
        status = response.status_code
        try:
            data: object = json.loads(content)
        except (ValueError, RecursionError):
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

    def _decode(self: _Adapter, response: httpx.Response, content: bytes) -> Mapping[str, Any]:
        try:
            data = json.loads(content)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            data = None
        if not isinstance(data, Mapping):
            raise InvalidResponseError(
                f"{self.backend} returned a body that is not a JSON object.",
                provider=self.backend,
                status_code=response.status_code,
            )
        return data

    def _bad_response(self: _Adapter, exc: Exception) -> InvalidResponseError:
        return InvalidResponseError(
            f"{self.backend} returned an unreadable response: "
            f"{type(exc).__name__}: {self.error_text(str(exc))}",
            provider=self.backend,
        )


# The key under which an open stream's response keeps its call's Interrupt.
_INTERRUPT = "llm_conversations.interrupt"


def _interrupt_of(response: httpx.Response) -> Interrupt:
    found = response.extensions.get(_INTERRUPT)
    return found if isinstance(found, Interrupt) else NO_INTERRUPT


def _text(response: httpx.Response, content: bytes) -> str:
    return content.decode(response.encoding or "utf-8", errors="replace")
