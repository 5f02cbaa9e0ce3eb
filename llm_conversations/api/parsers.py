"""Reading request bodies: bounded in size, refused when too deep or unstorable.

:class:`BoundedJSONParser` reads at most ``MAX_REQUEST_BYTES`` (413
``too_large`` beyond), refuses nesting deeper than
:data:`~llm_conversations.core.text.MAX_JSON_DEPTH` without recursing into it
unprotected, and applies the one storable-text policy
(:func:`check_text`) to the whole body. A body is read in the charset its
``Content-Type`` names (UTF-8 without one); a charset that is no known text
encoding is a 400 ``parse_error``.
Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` applies too, when it is smaller.

:class:`BodyRequest` hands the parser a body sent without a ``Content-Length``
(chunked), which DRF would otherwise read as empty: under ASGI Django holds the
whole body; under WSGI the body is read when the server marks its input as
terminated (``wsgi.input_terminated``, as gunicorn, uWSGI and mod_wsgi do),
and a chunked body that cannot be read safely is refused with 411.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest
from django.utils.http import parse_header_parameters
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request

from llm_conversations.api.errors import ApiError
from llm_conversations.conf import conf
from llm_conversations.core.text import MAX_JSON_DEPTH, json_problem

__all__ = ["BodyRequest", "BoundedJSONParser", "body_limit", "body_too_large", "check_text"]

_CHUNK = 64 * 1024


def body_limit() -> int:
    """Bytes a body may have: ``MAX_REQUEST_BYTES``, or Django's
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` when that is smaller."""
    django_limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    limit = conf.MAX_REQUEST_BYTES
    return limit if django_limit is None else min(limit, django_limit)


def body_too_large(limit: int | None = None) -> ApiError:
    """The error for a body over ``limit`` (:func:`body_limit`), however it was sent."""
    limit = body_limit() if limit is None else limit
    return ApiError(
        413,
        "too_large",
        f"The request body may have at most {limit} bytes.",
        details={"limit": limit},
    )


def check_text(value: Any, path: str = "") -> None:
    """Refuse request data that no supported database stores, naming the field.

    Applies the one storable-text policy (:func:`llm_conversations.core.text.json_problem`):
    NUL characters and lone surrogates (``invalid_text``), numbers that are not
    finite (``invalid_number``, e.g. ``1e400``) and nesting deeper than
    ``MAX_JSON_DEPTH`` (``too_deep``), anywhere in ``value``, keys included.
    The same request is then a 400 on every database, never a server error.
    """
    problem = json_problem(value, path)
    if problem is not None:
        raise ApiError(
            400, problem.code, f"{problem.why} is not allowed.", field=problem.path or None
        )


def _declared_length(request: HttpRequest) -> int | None:
    """The body's ``Content-Length``, or ``None`` when it has none (or a malformed one)."""
    value = request.headers.get("content-length")
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _unlengthed_body(request: HttpRequest) -> IO[bytes] | HttpRequest | None:
    """The stream of a body sent without a ``Content-Length``, if one can be read safely."""
    if isinstance(request, ASGIRequest):
        # Django has read the whole body into a file already.
        return request
    if isinstance(request, WSGIRequest):
        environ = request.environ
        if environ.get("wsgi.input_terminated"):
            stream: IO[bytes] = environ["wsgi.input"]
            return stream
        if "chunked" in request.headers.get("transfer-encoding", "").lower():
            # Reading on could block or read the chunk framing: refuse instead.
            raise ApiError(
                411,
                "length_required",
                "This server cannot read a chunked body: send a Content-Length.",
            )
    return None


class BodyRequest(Request):
    """A DRF request whose body is read even without a ``Content-Length``.

    A declared length over ``MAX_REQUEST_BYTES`` (:meth:`max_bytes`) is
    refused before reading.
    """

    def max_bytes(self) -> int:
        """The most bytes this request's body may have."""
        return body_limit()

    @property
    def stream(self) -> Any:
        length = _declared_length(self._request)
        limit = self.max_bytes()
        if length is not None and length > limit:
            raise body_too_large(limit)
        found = super().stream
        if found is None and length is None:
            return _unlengthed_body(self._request)
        return found


def _read_bounded(stream: IO[bytes] | HttpRequest, limit: int) -> bytes:
    """At most ``limit`` bytes of ``stream``; 413 when it holds more."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise body_too_large()
    return b"".join(chunks)


def _any_constant(name: str) -> float:
    # NaN and Infinity decode to floats; the text policy refuses them, naming the field.
    return float(name)


class BoundedJSONParser(BaseParser):
    """JSON bodies within :func:`body_limit`, ``MAX_JSON_DEPTH`` and the text policy.

    Not a ``JSONParser``: DRF reads the whole ``request.body`` for those
    (unbounded without a ``Content-Length``); this one reads the stream, bounded.
    A list body is a list of messages: its items are named ``messages[i]``.
    """

    media_type = "application/json"
    renderer_class = JSONRenderer

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        raw = _read_bounded(stream, body_limit())
        if not raw:
            # As DRF reads a body of length 0.
            return {}
        # The charset as sent: Django drops one it does not know, which would read the
        # body as UTF-8 whatever the client declared.
        _, params = parse_header_parameters(media_type or "")
        encoding = params.get("charset") or (parser_context or {}).get(
            "encoding", settings.DEFAULT_CHARSET
        )
        try:
            text = raw.decode(encoding)
        except LookupError:
            raise ApiError(
                400,
                "parse_error",
                f"The body's charset {encoding!r} is not a known text encoding.",
            ) from None
        except UnicodeDecodeError:
            raise ApiError(400, "parse_error", f"The body is not valid {encoding}.") from None
        try:
            data = json.loads(text, parse_constant=_any_constant)
        except RecursionError:
            raise ApiError(
                400, "too_deep", f"JSON may nest at most {MAX_JSON_DEPTH} levels deep."
            ) from None
        except json.JSONDecodeError as exc:
            raise ApiError(
                400,
                "parse_error",
                "The body is not valid JSON.",
                details={"line": exc.lineno, "column": exc.colno},
            ) from None
        except ValueError:
            # Python refuses to read an integer of more than 4,300 digits.
            raise ApiError(
                400, "invalid_number", "A number in the body has too many digits to read."
            ) from None
        check_text(data, "messages" if isinstance(data, list) else "")
        return data
