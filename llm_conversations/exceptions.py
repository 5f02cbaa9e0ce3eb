"""Every error the library raises, under one root that needs no Django.

Each carries a stable ``code`` (safe to branch on and to show API clients), a
``message`` for people and a ``field`` naming the offending input, dotted for
nested values (``messages[2].tool_calls[0].id``), or ``None``. The REST API
translates :class:`LLMConversationsError` once, with a status per code.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Self

__all__ = [
    "AuthenticationError",
    "BudgetExceeded",
    "CallInterrupted",
    "ContextOverflow",
    "ConversationBusy",
    "ConversationTrashed",
    "FeedbackError",
    "ForkError",
    "IdempotencyKeyError",
    "InvalidAttachment",
    "InvalidImport",
    "InvalidMessage",
    "InvalidOutput",
    "InvalidRequestError",
    "InvalidResponseError",
    "LLMConversationsError",
    "ParameterError",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnavailableError",
    "RateLimitError",
    "RunNotPermitted",
    "RunStateError",
    "ServerBusy",
    "ShareError",
    "TooManyActiveRuns",
    "TooManyWaitingRuns",
    "ToolArgumentsError",
    "ToolError",
    "UnsupportedContent",
    "join_field",
]


def join_field(prefix: str, field: str | None) -> str | None:
    """``prefix.field``, or whichever of the two is set."""
    if not prefix:
        return field
    return f"{prefix}.{field}" if field else prefix


class LLMConversationsError(Exception):
    """The root of every error of this library: ``code``, ``message``, ``field``."""

    def __init__(self, code: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
            f"field={self.field!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take other constructor arguments; rebuild from the state so
        # copies and pickles (task queues) work for every one of them.
        return (_rebuild, (type(self), self.message, self.__dict__))

    def within(self, prefix: str) -> Self:
        """The same error with ``field`` named from an enclosing value (``messages[2]``)."""
        moved = copy.copy(self)
        moved.field = join_field(prefix, self.field)
        return moved


def _rebuild(
    cls: type[LLMConversationsError], message: str, state: dict[str, Any]
) -> LLMConversationsError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class InvalidMessage(LLMConversationsError, ValueError):
    """A message, tool call or sequence of messages breaks a rule.

    ``field`` is ``None`` for rules about a whole sequence.
    """


class InvalidAttachment(LLMConversationsError, ValueError):
    """An upload is refused, or a message refers to an attachment it cannot show.

    Codes: ``attachment_too_large`` (over ``ATTACHMENT_MAX_BYTES``),
    ``unsupported_type`` (bytes of no allowed type), ``type_mismatch`` (the
    declared type is not what the bytes are), ``invalid_image`` (an image that
    does not decode), ``image_too_large`` (over ``ATTACHMENT_MAX_PIXELS``),
    ``invalid_pdf`` (a PDF without its header or end, or without pages),
    ``too_many_pages`` (over ``ATTACHMENT_MAX_PDF_PAGES``), ``empty_file``,
    ``missing_file`` (an upload without its ``file`` part), and
    ``unknown_attachment`` (an attachment gone before a provider call). A
    message naming an attachment it may not show is an :class:`InvalidMessage`
    (``unknown_attachment``, ``attachment_kind_mismatch``, ``missing_attachment``).
    """


class ConversationBusy(LLMConversationsError):
    """Another run of the conversation is active, so the request must wait."""

    def __init__(self, message: str = "another run of this conversation is still active.") -> None:
        super().__init__("conversation_busy", message)


class ConversationTrashed(LLMConversationsError):
    """The conversation is in the trash: it is read-only until it is restored."""

    def __init__(
        self, message: str = "the conversation is in the trash; restore it to change it."
    ) -> None:
        super().__init__("conversation_trashed", message)


class ServerBusy(LLMConversationsError):
    """Too many runs are being started in this process at once (``server_busy``,
    ``RUN_START_CONCURRENCY``); nothing was stored, and the same request may be
    sent again shortly."""

    def __init__(self, message: str) -> None:
        super().__init__("server_busy", message)


class BudgetExceeded(LLMConversationsError):
    """A user's or a conversation's budget is spent, or the next model call would
    go past it (``budget_exceeded``); nothing was sent."""

    def __init__(self, message: str) -> None:
        super().__init__("budget_exceeded", message)


class CallInterrupted(LLMConversationsError):
    """A provider call ended early because its run had to stop: the run's deadline
    passed (``run_timeout``) or the run was cancelled or taken over meanwhile
    (``run_stopped``). Never retried; what the call had sent is not stored."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)

    @property
    def timed_out(self) -> bool:
        """Whether the run's deadline, not a stop, ended the call."""
        return self.code == "run_timeout"


class ContextOverflow(LLMConversationsError):
    """What a model call would send does not fit the model's context window
    (``context_overflow``); nothing was sent."""

    def __init__(self, message: str) -> None:
        super().__init__("context_overflow", message)


class FeedbackError(LLMConversationsError, ValueError):
    """A rating cannot be stored.

    Codes: ``not_an_assistant_message`` (only assistant turns are rated),
    ``invalid_rating`` (not 1 or -1) and ``invalid_comment`` (too long, not
    text, or text no database stores).
    """


class ForkError(LLMConversationsError, ValueError):
    """A conversation cannot be forked, edited or regenerated where asked.

    Codes: ``unknown_message`` (not a message of the conversation),
    ``inside_tool_group`` (the fork would keep tool calls without their
    results), ``not_a_user_message`` (only user turns are edited),
    ``not_an_assistant_message`` (only assistant turns are regenerated) and
    ``nothing_to_regenerate`` (no user turn before the answer).
    """


class ShareError(LLMConversationsError, ValueError):
    """A share link cannot be made, read or copied.

    Codes: ``share_not_found`` (no usable link has the token: unknown,
    revoked or expired, or its conversation is in the trash; answered as a
    404), ``unknown_message`` (not a message of the conversation),
    ``inside_tool_group`` (the snapshot would end between tool calls and
    their results), ``empty_conversation`` (nothing to share yet: no message,
    or all hidden), ``unknown_owner`` (a conversation without an owner),
    ``invalid_expiry`` (an expiry not in the future) and ``snapshot_changed``
    (a turn came back into the snapshot while it was copied: 409, copy again).
    """


class IdempotencyKeyError(LLMConversationsError):
    """An ``Idempotency-Key`` cannot be used for this request.

    Codes: ``idempotency_key_reused`` (the key named another request) and
    ``idempotency_key_in_use`` (its first request is still being answered).
    """


class InvalidImport(LLMConversationsError, ValueError):
    """A conversation of an import file cannot be imported; nothing of it is stored.

    Codes: ``invalid_import`` (not the shape of its format; ``field`` names the
    value), ``unsupported_version``, ``unknown_format`` (a file in none of the
    formats read), ``unknown_user`` (no user has the username),
    ``conversation_exists`` (its id, or one of its rows' ids, is taken; for
    another tool's file: imported before), plus the codes of
    :class:`InvalidMessage` for messages that break a rule and of
    :class:`InvalidAttachment` for the files it carries.
    """


class RunNotPermitted(LLMConversationsError):
    """The run policy (``RUN_POLICY``) does not let this user run with what was asked.

    Codes: ``provider_not_permitted``, ``model_not_permitted``,
    ``tool_not_permitted`` and ``max_iterations_not_permitted``; ``field``
    names the request field.
    """


class TooManyActiveRuns(LLMConversationsError):
    """The user has ``MAX_ACTIVE_RUNS_PER_USER`` active runs already (code
    ``too_many_active_runs``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            "too_many_active_runs",
            f"at most {limit} run(s) of one user may be active at a time; "
            "wait for one to finish or cancel it.",
        )
        self.limit = limit


class TooManyWaitingRuns(LLMConversationsError):
    """``MAX_WAITING_RUNS`` runs wait behind the conversation's active run already
    (code ``too_many_waiting_runs``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            "too_many_waiting_runs",
            f"at most {limit} run(s) may wait behind a conversation's active run; "
            "wait for one to start or cancel it.",
        )
        self.limit = limit


class RunStateError(LLMConversationsError, ValueError):
    """A request does not fit the run's state or names calls it does not have."""


class ParameterError(LLMConversationsError, ValueError):
    """A run parameter is invalid, or the provider cannot honour it.

    Codes: ``invalid_parameter`` (wrong type or out of range, ``field`` names
    it), ``unknown_parameter``, ``invalid_response_format`` (not a usable JSON
    Schema), ``tool_not_offered`` (``tool_choice`` names a tool the run does not
    offer, or forces a call with none offered), ``model_not_allowed`` (not a
    model of the provider entry) and ``unsupported_parameter`` (the provider
    has no way to honour it; the message names provider and parameter).
    """


class InvalidOutput(LLMConversationsError):
    """The model's final answer did not match the run's ``response_format``,
    repair rounds included (code ``invalid_output``)."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_output", message)


class ToolError(LLMConversationsError, ValueError):
    """A tool is declared, registered, looked up or executed the wrong way.

    Codes: ``invalid_tool``, ``invalid_tool_name``, ``invalid_tool_schema``,
    ``duplicate_tool``, ``unknown_tool``, ``not_a_tool``, ``tool_import_error``,
    ``client_side_tool`` or ``invalid_arguments``.
    """


class ToolArgumentsError(ToolError):
    """The model's arguments for a call are malformed or fail the tool's schema.

    The message is written for the model, so it can correct the call and retry.
    """

    def __init__(self, message: str) -> None:
        super().__init__("invalid_arguments", message)


class ProviderError(LLMConversationsError):
    """Base class of every failure of a provider call (code ``provider_error``).

    ``provider`` is the backend name (``"openai"``), ``status_code`` the HTTP
    status when there was a response, ``provider_message`` the provider's own
    explanation (key redacted), ``retry_after`` the seconds the provider asked
    to wait. ``retryable`` says whether the adapter retries this kind of failure.
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
        super().__init__("provider_error", message)
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


class UnsupportedContent(InvalidRequestError):
    """A message holds a content part the provider cannot take (code
    ``unsupported_content``); raised before the request is sent."""

    def __init__(self, message: str, *, provider: str = "") -> None:
        super().__init__(message, provider=provider)
        self.code = "unsupported_content"


class ProviderUnavailableError(ProviderError):
    """A server error (5xx), a connection failure or a broken stream."""

    retryable = True


class ProviderTimeout(ProviderUnavailableError):
    """The provider did not answer within ``timeout`` seconds."""


class InvalidResponseError(ProviderError):
    """The provider answered with a body this adapter cannot read."""
