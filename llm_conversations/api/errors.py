"""One error format for every API response, and the exception handler that produces it.

Every error is ``{"error": {"code", "message", "field", "details"}}``. ``code``
is stable (safe to branch on); ``field`` names the offending request field,
dotted for nested ones (``message.content``, ``tool_outputs[1].tool_call_id``),
or is ``null``: the handler names it once, as the request sent it
(:func:`sent_field`), whether a serializer or a service refused the value. The
status of each code is chosen here only. The handler is installed on the API's
base view, so the host project's ``REST_FRAMEWORK`` settings need no change.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import (
    ObjectDoesNotExist,
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import DatabaseError, IntegrityError, OperationalError
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import set_rollback

from llm_conversations.core.text import REPLACEMENT
from llm_conversations.exceptions import LLMConversationsError, join_field
from llm_conversations.models import Run, RunStatus, TerminationReason

__all__ = [
    "ApiError",
    "api_exception_handler",
    "as_api_error",
    "error_body",
    "failed_run_error",
    "sent_field",
]

logger = logging.getLogger("llm_conversations.api")

# Validation codes that are part of the documented contract; any other
# validation failure is reported as ``invalid``.
PUBLIC_VALIDATION_CODES = frozenset(
    {
        "duplicate_tool_output",
        "invalid_events",
        "invalid_number",
        "invalid_secret",
        "invalid_text",
        "invalid_tool_name",
        "invalid_url",
        "too_deep",
        "too_large",
        "too_many_fields",
        "too_many_messages",
        "too_many_metadata_keys",
        "unknown_field",
        "unknown_provider",
        "unknown_tool",
    }
)

# The status of each library error code that is not a 400: the run policy
# refuses it (403), a share link is unknown, revoked or expired (404), the
# conversation or run is in the wrong state (409), too many runs are active
# (429), the run failed on the server (500) or upstream (502), or for an
# expected reason (_FAILED_RUNS). Every other code describes bad input.
_STATUS_BY_CODE = {
    "provider_not_permitted": 403,
    "model_not_permitted": 403,
    "tool_not_permitted": 403,
    "max_iterations_not_permitted": 403,
    "too_many_active_runs": 429,
    "too_many_waiting_runs": 429,
    "budget_exceeded": 429,
    "share_not_found": 404,
    "conversation_busy": 409,
    "conversation_trashed": 409,
    "run_not_waiting": 409,
    "run_not_active": 409,
    "run_not_failed": 409,
    "stale_decision": 409,
    "snapshot_changed": 409,
    "idempotency_key_in_use": 409,
    "idempotency_key_reused": 422,
    "context_overflow": 422,
    "run_failed": 500,
    "provider_error": 502,
    "invalid_output": 502,
    "server_busy": 503,
    "worker_lost": 503,
    "run_timeout": 504,
}

# What a failed run is answered with, by why it failed: the provider's failure,
# or an answer that never matched the response_format, is upstream's (502); the
# run's deadline (504), its workers lost (503), a conversation too long for the
# model (422) and a budget spent (429) are expected ends too. Only an error the
# loop did not expect is a failure on the server (500; the run's error and the
# log say what).
_FAILED_RUNS: dict[str, tuple[str, str]] = {
    TerminationReason.TIMEOUT: ("run_timeout", "Run {run} ran out of time (RUN_TIMEOUT)."),
    TerminationReason.WORKER_LOST: (
        "worker_lost",
        "The workers executing run {run} were lost; retry/ runs it again.",
    ),
    TerminationReason.CONTEXT_OVERFLOW: (
        "context_overflow",
        "The conversation does not fit the model's context window; run {run} records the error.",
    ),
    TerminationReason.BUDGET_EXCEEDED: (
        "budget_exceeded",
        "A budget was spent during run {run}; the run records which.",
    ),
    TerminationReason.PROVIDER_ERROR: (
        "provider_error",
        "The provider failed; run {run} records the error.",
    ),
    TerminationReason.INVALID_OUTPUT: (
        "invalid_output",
        "The model's answer did not match the response_format; run {run} records the error.",
    ),
}
_RUN_FAILED = ("run_failed", "Run {run} failed on the server.")

# Seconds a client should wait before retrying a request refused for now: the
# database could not serve it (a pool or lock timeout, a lost connection), or
# too many runs were being started (RUN_START_CONCURRENCY). The Retry-After of
# each 503.
RETRY_AFTER = {"database_unavailable": 1, "server_busy": 1}


class ApiError(exceptions.APIException):
    """An API error with a stable ``code``, an optional ``field`` and ``details``."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        details: Any = None,
    ) -> None:
        super().__init__(message, code)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.field = field
        self.details = details


def error_body(
    code: str, message: str, *, field: str | None = None, details: Any = None
) -> dict[str, Any]:
    """The JSON body of an error response.

    Field names and details may quote the request, whose keys can hold what no
    JSON encoder writes (a lone surrogate): those characters are replaced, so
    the error itself always renders.
    """
    body = {"code": code, "message": message, "field": field, "details": details}
    return {"error": _renderable(body)}


# What JSON cannot encode: a lone surrogate (NUL it writes as \u0000).
_SURROGATE = re.compile("[\ud800-\udfff]")


def _renderable(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, Mapping):
        return {_renderable(key): _renderable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_renderable(item) for item in value]
    return value


def failed_run_error(run: Run, data: Any) -> ApiError | None:
    """The error that answers ``run`` when it failed (``data``, its representation, is in
    ``details.run``); ``None`` when it did not."""
    if run.status != RunStatus.FAILED:
        return None
    code, text = _FAILED_RUNS.get(run.termination_reason, _RUN_FAILED)
    return ApiError(_STATUS_BY_CODE[code], code, text.format(run=run.pk), details={"run": data})


def sent_field(field: str | None, names: Mapping[str, str]) -> str | None:
    """``field`` named as the request sent the value: a name in ``names`` that ``field`` is or
    starts with (``messages[0]``, then ``.`` or ``[``) is replaced by the request's own
    (``""``: the body itself)."""
    if field is None:
        return None
    for name, sent in names.items():
        rest = field.removeprefix(name)
        if rest == field or rest[:1] not in ("", ".", "["):
            continue
        return join_field(sent, rest.removeprefix(".") or None)
    return field


def _first_error(detail: Any, path: str = "") -> tuple[str, exceptions.ErrorDetail | str]:
    """The dotted path and detail of the first error in a DRF validation detail."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            if key == "non_field_errors":
                return _first_error(value, path)
            if isinstance(key, int):
                # Lists report failing items by index.
                return _first_error(value, f"{path}[{key}]")
            child = f"{path}.{key}" if path else str(key)
            return _first_error(value, child)
    if isinstance(detail, list):
        for index, value in enumerate(detail):
            if isinstance(value, dict | list) and value:
                # A list of nested serializers: the index belongs to the path.
                return _first_error(value, f"{path}[{index}]")
            if isinstance(value, str):
                return path, value
    return path, str(detail)


def _from_validation(exc: exceptions.ValidationError) -> ApiError:
    field, detail = _first_error(exc.detail)
    code = getattr(detail, "code", None)
    public = code if code in PUBLIC_VALIDATION_CODES else "invalid"
    return ApiError(400, public, str(detail), field=field or None, details=exc.detail)


def as_api_error(exc: Exception) -> ApiError | None:
    """Translate a known exception into an :class:`ApiError`; ``None`` for unknown ones."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, LLMConversationsError):
        wait = RETRY_AFTER.get(exc.code)
        return ApiError(
            _STATUS_BY_CODE.get(exc.code, 400),
            exc.code,
            exc.message,
            field=exc.field,
            details=None if wait is None else {"retry_after": wait},
        )
    if isinstance(exc, exceptions.NotFound):
        # DRF's own wording says why, e.g. "Invalid page." from pagination.
        return ApiError(404, "not_found", str(exc.detail))
    if isinstance(exc, Http404 | ObjectDoesNotExist):
        # ObjectDoesNotExist: the object was deleted while the request ran.
        return ApiError(404, "not_found", "Not found.")
    if isinstance(exc, RequestDataTooBig):
        # Django's DATA_UPLOAD_MAX_MEMORY_SIZE, for a body with a Content-Length.
        return ApiError(413, "too_large", "The request body is too large.")
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        # Django's DATA_UPLOAD_MAX_NUMBER_FIELDS / _FILES, for a form body.
        return ApiError(400, "too_many_fields", "The form has too many fields or files.")
    if isinstance(exc, DjangoPermissionDenied):
        # Stable words: the exception's own text is for the log, not the client.
        return ApiError(403, "permission_denied", "Permission denied.")
    if isinstance(exc, exceptions.ValidationError):
        return _from_validation(exc)
    if isinstance(exc, exceptions.Throttled):
        # The same seconds as the Retry-After header, for clients that read bodies only.
        return ApiError(
            429, "throttled", str(exc.detail), details={"retry_after": getattr(exc, "wait", None)}
        )
    if isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        return ApiError(exc.status_code, code, str(exc.detail))
    return None


def _from_database(exc: DatabaseError) -> ApiError:
    """The last resort for a database error that no owner turned into a library error.

    Each is a bug to fix where it arises, so it is logged with its traceback;
    the client gets the error format with a stable message and no SQL.
    """
    if isinstance(exc, OperationalError):
        # Transient: no pooled connection within the pool's timeout, a lock wait
        # over lock_timeout, a dropped connection. The request changed nothing
        # (its transaction rolled back), so the client may simply retry.
        logger.warning("Database unavailable in an API request: %s", type(exc).__name__)
        return ApiError(
            503,
            "database_unavailable",
            "The database is busy or unavailable; retry shortly.",
            details={"retry_after": RETRY_AFTER["database_unavailable"]},
        )
    logger.error("Database error in an API request", exc_info=exc)
    if isinstance(exc, IntegrityError):
        # A constraint refused a write: a concurrent change the services did not foresee.
        return ApiError(409, "conflict", "The request conflicts with a concurrent change.")
    return ApiError(500, "server_error", "The server could not complete the request.")


def _unexpected(exc: Exception) -> ApiError:
    """An exception nobody expected: a bug, logged with its traceback, answered as JSON."""
    logger.error("Unexpected error in an API request", exc_info=exc)
    return ApiError(500, "server_error", "The server could not complete the request.")


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF exception handler: every known failure becomes the one error format.

    Database errors are logged and answered in the error format (409
    ``conflict`` for a constraint, 503 ``database_unavailable`` with
    ``Retry-After`` for a transient failure, 500 ``server_error`` otherwise); any
    other exception is a bug, logged (``llm_conversations.api``, ERROR, with its
    traceback) and answered 500 ``server_error`` in the same format, never
    Django's HTML page.
    Like DRF's own handler, it marks an ``ATOMIC_REQUESTS`` transaction for
    rollback.
    """
    error = as_api_error(exc)
    if error is None and isinstance(exc, DatabaseError):
        error = _from_database(exc)
    if error is None:
        error = _unexpected(exc)
    set_rollback()
    sent_names = getattr(context.get("view"), "sent_names", None)
    if callable(sent_names):
        error.field = sent_field(error.field, sent_names())
    headers: dict[str, str] = {}
    if isinstance(exc, exceptions.APIException):
        # Keep WWW-Authenticate and Retry-After, which DRF's own handler sets.
        auth_header = getattr(exc, "auth_header", None)
        if auth_header:
            headers["WWW-Authenticate"] = auth_header
        wait = getattr(exc, "wait", None)
        if wait is not None:
            headers["Retry-After"] = str(int(wait))
    elif error.code in RETRY_AFTER:
        headers["Retry-After"] = str(RETRY_AFTER[error.code])
    return Response(
        error_body(error.code, error.message, field=error.field, details=error.details),
        status=error.status_code,
        headers=headers,
    )
