"""The ``Idempotency-Key`` header of ``POST messages/``, ``POST runs/``, ``chat/`` and
the other requests that store messages or start runs.

A request repeated with the same key, path and body (by the same user) gets the
first answer again, status and body, and stores nothing twice. The rules live
in :mod:`llm_conversations.conversations.idempotency`; here the request is reduced
to what they compare and the answer to what they store.

Which answers are kept: successes, and the 5xx answers of a run that failed
after it was stored (``run_failed``, ``provider_error``). A refused request
(4xx: nothing was stored) releases its key, so the client may send it again.
A streamed answer is kept as its run and its format: a repeat gets that run's
log as events, as UI message chunks when the first answer was (``chat/``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.http import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder

from llm_conversations.api.errors import ApiError, as_api_error, error_body
from llm_conversations.api.streams.formats import FORMATS
from llm_conversations.api.streams.responses import RunStream, log_stream_response
from llm_conversations.conversations import idempotency

__all__ = ["HEADER", "IDEMPOTENCY_KEY", "idempotent"]

HEADER = "Idempotency-Key"
MAX_KEY_CHARS = 255

IDEMPOTENCY_KEY = OpenApiParameter(
    HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "Makes the request safe to repeat: the same key with the same body answers the "
        "first answer again; with another body 422 `idempotency_key_reused`; while the "
        "first is still answered 409 `idempotency_key_in_use`. 1 to 255 printable ASCII "
        "characters; kept `IDEMPOTENCY_KEY_TTL` seconds per user."
    ),
    pattern=r"^[\x20-\x7e]{1,255}$",
)


def _checked_key(value: str) -> str:
    if not 1 <= len(value) <= MAX_KEY_CHARS or not all(" " <= c <= "~" for c in value):
        raise ApiError(
            400,
            "invalid",
            f"{HEADER} must be 1 to {MAX_KEY_CHARS} printable ASCII characters.",
            field=HEADER,
        )
    return value


def _body_hash(data: Any) -> str:
    text = json.dumps(data, cls=JSONEncoder, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _as_json(data: Any) -> Any:
    # The body as the client received it: what JSONRenderer makes of it.
    return json.loads(JSONRenderer().render(data))


_STREAM_KEYS = {"stream", "format", "ai_sdk"}


def _replay(request: Request, status: int, stored: Any) -> HttpResponseBase:
    if isinstance(stored, dict) and "stream" in stored and set(stored) <= _STREAM_KEYS:
        # A stream is replayed as the run's log in its format, whatever the repeat asks
        # (a key stored before formats had names says "ai_sdk").
        name = stored.get("format") or ("ai-sdk" if stored.get("ai_sdk") else "events")
        fmt = FORMATS.get(name, FORMATS["events"])
        return log_stream_response(request._request, stored["stream"], 0, fmt)
    return Response(stored, status=status)


def idempotent(request: Request, answer: Callable[[], HttpResponseBase]) -> HttpResponseBase:
    """``answer()``, or the stored answer of the request that first sent this key."""
    header = request.headers.get(HEADER)
    if header is None or not request.user.is_authenticated:
        return answer()
    key = _checked_key(header)
    # Every route takes its path with or without the trailing slash (api/urls.py).
    path = request.path.removesuffix("/") + "/"
    row, claimed = idempotency.claim(
        request.user, key, f"{request.method} {path}", _body_hash(request.data)
    )
    if not claimed:
        return _replay(request, row.status or 200, row.response)
    try:
        response = answer()
    except Exception as exc:
        error = as_api_error(exc)
        if error is not None and error.status_code >= 500:
            # The run was stored, then failed: a repeat must not store it again.
            body = error_body(error.code, error.message, field=error.field, details=error.details)
            idempotency.complete(row, error.status_code, _as_json(body))
        else:
            idempotency.release(row)
        raise
    if isinstance(response, RunStream):
        kept = {"stream": str(response.run_id), "format": response.stream_format}
        idempotency.complete(row, response.status_code, kept)
    elif isinstance(response, Response):
        idempotency.complete(row, response.status_code, _as_json(response.data))
    else:
        idempotency.release(row)
    return response
