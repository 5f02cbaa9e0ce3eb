"""Serializers: the shape of request input and one declaration per response shape.

Input serializers shape types and apply the API's own size limits; the rules
about messages, runs, providers and tools belong to the services, which raise
errors the API translates once (:mod:`llm_conversations.api.errors`).

:class:`RunSerializer` represents a run from its declared fields.
:class:`MessageSerializer` declares a message's fields and represents a row
through :func:`~llm_conversations.api.representations.message_data`, a fast
path for long histories; a test keeps the two field sets equal.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from llm_conversations.api.errors import ApiError
from llm_conversations.api.inputs import ROLE_CHOICES, too_large
from llm_conversations.api.representations import message_data, message_row
from llm_conversations.completions import FinishReason
from llm_conversations.conf import conf
from llm_conversations.models import (
    MAX_ID_CHARS,
    Conversation,
    Decision,
    Message,
    PendingCall,
    Run,
    RunStatus,
    WaitReason,
)

_T = TypeVar("_T")

# Strict input types ----------------------------------------------------------


def _type_problem(field: serializers.Field[Any, Any, Any, Any], value: Any) -> str | None:
    """Why ``value`` has the wrong JSON type for ``field``; DRF would coerce it."""
    if value is None:
        return None  # the field's own allow_null decides
    if isinstance(field, serializers.BooleanField):
        return None if isinstance(value, bool) else "Must be a boolean."
    if isinstance(field, serializers.IntegerField):
        # JSON Schema's integer: 2 or 2.0, not 2.5, "2" or true.
        integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        return None if integral and not isinstance(value, bool) else "Must be an integer."
    if isinstance(field, serializers.CharField):
        return None if isinstance(value, str) else "Must be a string."
    if isinstance(field, serializers.ListField):
        if not isinstance(value, list):
            return "Must be a list."
        for item in value:
            problem = _type_problem(field.child, item)
            if problem:
                return f"Each item: {problem[0].lower()}{problem[1:]}"
    return None


class StrictTypes(serializers.Serializer[_T]):
    """Input in the declared JSON types only: ``0`` is not a string, ``"true"`` not a boolean."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            errors = {
                name: [ErrorDetail(problem, code="invalid")]
                for name, field in self.fields.items()
                if not field.read_only
                and name in data
                and (problem := _type_problem(field, data[name]))
            }
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


class MetadataField(serializers.DictField):
    """A JSON object of any values (``null`` included), at most ``MAX_METADATA_KEYS`` keys."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.JSONField(allow_null=True), **kwargs)


class MaxIterationsField(serializers.IntegerField):
    """``max_iterations``: 1 to ``MAX_ITERATIONS_LIMIT`` (checked by the service)."""


class ToolOutputField(serializers.JSONField):
    """A tool's output: any JSON value; text within ``MAX_MESSAGE_CHARS``."""


class MessagesInputSerializer(serializers.Serializer[Any]):
    """A message POST body: one message object or a list of them (schema only)."""


# Errors ---------------------------------------------------------------------


class ErrorDetailSerializer(serializers.Serializer[Any]):
    """The body of an error."""

    code = serializers.CharField(help_text="Stable error code, e.g. `conversation_busy`.")
    message = serializers.CharField(help_text="What went wrong, for people.")
    field = serializers.CharField(
        allow_null=True, help_text="The offending request field, dotted (`message.content`)."
    )
    # Any JSON value, null included (declared without allow_null, which
    # Open API 3.1 output would turn into an ambiguous oneOf).
    details = serializers.JSONField(
        help_text="More about the error: validation messages by field, a run."
    )


class ErrorSerializer(serializers.Serializer[Any]):
    """Every error response: `{"error": {...}}`."""

    error = ErrorDetailSerializer()


# Conversations ----------------------------------------------------------------

ORDERING_FIELDS = ("created_at", "updated_at", "title", "message_count")
_ORDER_ONE = f"-?(?:{'|'.join(ORDERING_FIELDS)})"
ORDERING_PATTERN = f"^{_ORDER_ONE}(?:,{_ORDER_ONE})*$"


class ConversationSerializer(StrictTypes[Conversation], serializers.ModelSerializer[Conversation]):
    """A conversation with its message count, last activity and active run."""

    metadata = MetadataField(
        required=False,
        help_text="Free-form JSON object of any values; at most `MAX_METADATA_KEYS` keys.",
    )
    active_run = serializers.UUIDField(
        read_only=True, allow_null=True, help_text="The run in progress, if any."
    )
    updated_at = serializers.DateTimeField(
        read_only=True, help_text="Last activity: the last appended message or edit."
    )

    class Meta:
        model = Conversation
        fields = [
            "id",
            "title",
            "metadata",
            "message_count",
            "active_run",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "message_count", "created_at"]

    def validate_metadata(self, value: dict[str, Any]) -> dict[str, Any]:
        """Refuse more keys than ``MAX_METADATA_KEYS``."""
        limit = conf.MAX_METADATA_KEYS
        if len(value) > limit:
            raise serializers.ValidationError(
                f"metadata may have at most {limit} keys; got {len(value)}.",
                code="too_many_metadata_keys",
            )
        return value


# Messages ---------------------------------------------------------------------


class FunctionCallSerializer(serializers.Serializer[Any]):
    """The function a call names, with its arguments as JSON text."""

    name = serializers.CharField()
    arguments = serializers.CharField(
        allow_blank=True, help_text='JSON text of the arguments object (`"{}"` when empty).'
    )


class ToolCallSerializer(serializers.Serializer[Any]):
    """A tool call in the OpenAI form."""

    id = serializers.CharField()
    type = serializers.ChoiceField(choices=["function"])
    function = FunctionCallSerializer()


class UsageSerializer(serializers.Serializer[Any]):
    """Token usage (characters for the echo backend)."""

    input_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    total_tokens = serializers.IntegerField(allow_null=True)
    cached_tokens = serializers.IntegerField(allow_null=True)


class MessageSerializer(serializers.Serializer[Message]):
    """A stored message: the `ChatMessage.to_wire()` fields plus stored ones.

    `tool_calls` is present on assistant turns with calls (their `content` may
    then be `null`), `tool_call_id` on tool turns.
    """

    id = serializers.UUIDField()
    position = serializers.IntegerField(help_text="0-based index in the conversation.")
    role = serializers.ChoiceField(choices=ROLE_CHOICES)
    content = serializers.CharField(allow_null=True, allow_blank=True)
    tool_calls = ToolCallSerializer(many=True, required=False)
    tool_call_id = serializers.CharField(required=False)
    is_error = serializers.BooleanField(help_text="A tool result that reports a failure.")
    run = serializers.UUIDField(allow_null=True, help_text="The run that stored this turn.")
    created_at = serializers.DateTimeField()
    model = serializers.CharField(allow_null=True, help_text="Assistant turns: the model.")
    finish_reason = serializers.ChoiceField(
        choices=[reason.value for reason in FinishReason],
        allow_null=True,
        help_text=(
            "Assistant turns a provider answered: why the model stopped. An empty "
            'reply (`content` `""`, no calls) with `content_filter` is a refusal.'
        ),
    )
    usage = UsageSerializer(allow_null=True, help_text="Assistant turns: token usage.")

    def to_representation(self, instance: Message) -> dict[str, Any]:
        return message_data(message_row(instance))


# Answered by the message list: one page object, not the array a "list" action
# usually answers.
@extend_schema_serializer(many=False)
class MessagePageSerializer(serializers.Serializer[Any]):
    """A page of messages, as OpenAI's Conversations API lists items."""

    data = MessageSerializer(many=True)  # type: ignore[assignment]  # a field, not .data
    first_id = serializers.UUIDField(allow_null=True)
    last_id = serializers.UUIDField(allow_null=True)
    has_more = serializers.BooleanField()


class ConversationListQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of the conversation list; each, when present, must be valid."""

    page = serializers.IntegerField(required=False, min_value=1, help_text="1-based page.")
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=100, help_text="Page size, 1-100 (default 20)."
    )
    search = serializers.CharField(
        required=False, allow_blank=True, help_text="Words the title contains."
    )
    ordering = serializers.RegexField(
        ORDERING_PATTERN,
        required=False,
        help_text="Comma-separated fields, `-` first for descending: "
        + ", ".join(f"`{name}`" for name in ORDERING_FIELDS)
        + ".",
    )


class MessageListQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of the message list; each, when present, must be valid."""

    after = serializers.UUIDField(
        required=False, help_text="A message id: list the messages after it in `order`."
    )
    limit = serializers.IntegerField(
        required=False, default=20, min_value=1, max_value=100, help_text="Page size, 1-100."
    )
    order = serializers.ChoiceField(
        choices=["asc", "desc"],
        required=False,
        default="desc",
        help_text="`asc`: oldest first; `desc`: newest first.",
    )


# Runs -------------------------------------------------------------------------


class UserMessageField(serializers.JSONField):
    """A user message: its text, or the message object, passed on as sent.

    Only the type and the size limit are checked here; the service that
    starts the run validates the message.
    """

    def to_internal_value(self, data: Any) -> str | dict[str, Any]:  # type: ignore[override]
        data = super().to_internal_value(data)
        if isinstance(data, str):
            if len(data) > conf.MAX_MESSAGE_CHARS:
                raise too_large("message")
            return data
        if not isinstance(data, dict):
            raise ApiError(
                400, "invalid", "message must be a string or an object.", field="message"
            )
        content = data.get("content")
        if isinstance(content, str) and len(content) > conf.MAX_MESSAGE_CHARS:
            raise too_large("message.content")
        return data


class RunCreateSerializer(StrictTypes[Any]):
    """Start a run: store the user turn, then answer it with the tool loop."""

    message = UserMessageField(help_text="The user turn: text or a message object.")
    provider = serializers.CharField(
        required=False,
        min_length=1,
        trim_whitespace=False,
        help_text="A key of `PROVIDERS`; the default provider when omitted.",
    )
    tools = serializers.ListField(
        child=serializers.CharField(min_length=1, trim_whitespace=False),
        required=False,
        allow_null=True,
        help_text="Names of the tools to offer (see `/tools/`); all of them when omitted.",
    )
    max_iterations = MaxIterationsField(
        required=False,
        help_text="Model calls before the loop closes the run: 1 to `MAX_ITERATIONS_LIMIT`.",
    )
    stream = serializers.BooleanField(
        required=False, default=False, help_text="Answer with Server-Sent Events."
    )
    background = serializers.BooleanField(
        required=False,
        help_text=(
            "Queue the run for a task worker and answer 202 with the queued run (with "
            "`stream`: its events as they are logged); `BACKGROUND_RUNS` when omitted."
        ),
    )


class RunRetrySerializer(StrictTypes[Any]):
    """Run a failed run again, from its stored turns, as a new attempt."""

    background = serializers.BooleanField(
        required=False,
        help_text="Queue the retry for a task worker (202); `BACKGROUND_RUNS` when omitted.",
    )


class RunListQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of the run list."""

    cursor = serializers.CharField(
        required=False, help_text="The `next` or `previous` link's cursor."
    )
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=100, help_text="Runs per page: 1 to 100 (20)."
    )


class RunEventsQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of a run's event stream."""

    after = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=2**63 - 1,
        help_text="Send the events after this event id (as `Last-Event-ID` does).",
    )


class PendingToolCallSerializer(ToolCallSerializer):
    """A call the run waits for, and why."""

    reason = serializers.ChoiceField(
        choices=WaitReason.values,
        help_text="`requires_approval`: approve or deny it; `client_side`: submit its output.",
    )

    def to_representation(self, instance: PendingCall) -> dict[str, Any]:
        # A PendingCall from Run.waiting_calls: the call's own wire form
        # (arguments as JSON text, or as the model sent them) plus the reason.
        return {**instance.call.to_wire(), "reason": instance.reason.value}


class RunErrorSerializer(serializers.Serializer[Run]):
    """Why a run failed."""

    type = serializers.CharField(source="error_type")
    message = serializers.CharField(source="error_message", allow_blank=True)


# Run timestamps are shown in UTC, as message timestamps are, whatever TIME_ZONE is.
_UTC = datetime.UTC


class RunSerializer(serializers.Serializer[Run]):
    """One execution of the tool loop."""

    id = serializers.UUIDField()
    conversation = serializers.UUIDField(source="conversation_id")
    status = serializers.ChoiceField(choices=RunStatus.values)
    termination_reason = serializers.SerializerMethodField(
        help_text="completed, max_iterations, provider_error, error or cancelled."
    )
    provider = serializers.CharField(allow_blank=True)
    model = serializers.CharField(allow_blank=True)
    tools = serializers.ListField(
        source="offered_tool_names", child=serializers.CharField(), help_text="Tools offered."
    )
    max_iterations = serializers.IntegerField()
    iterations = serializers.IntegerField(help_text="Model calls so far.")
    usage = UsageSerializer(source="*")
    pending_tool_calls = PendingToolCallSerializer(source="waiting_calls", many=True)
    decisions = serializers.DictField(
        child=serializers.ChoiceField(choices=Decision.values),
        help_text="Decisions by call id.",
    )
    error = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField(default_timezone=_UTC)
    started_at = serializers.DateTimeField(default_timezone=_UTC, allow_null=True)
    finished_at = serializers.DateTimeField(default_timezone=_UTC, allow_null=True)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_termination_reason(self, run: Run) -> str | None:
        """Why the run ended; ``None`` while it has not."""
        return run.termination_reason or None

    @extend_schema_field(RunErrorSerializer(allow_null=True))
    def get_error(self, run: Run) -> dict[str, Any] | None:
        """Why the run failed; ``None`` unless it did."""
        return RunErrorSerializer(run).data if run.error_type else None


class StreamEventSerializer(serializers.Serializer[Any]):
    """The JSON object in the `data:` line of each Server-Sent Event.

    `text.delta` carries `delta`; `tool_call.started` carries `tool_call`;
    `tool_result.stored` and `message.stored` carry `message` (the stored
    row, with its id); `run.running` (with `attempt`), `run.requires_action`,
    `run.completed`, `run.failed` and `run.cancelled` carry `run` (the run as it
    stands when the event is sent).
    """

    run_id = serializers.UUIDField()
    attempt = serializers.IntegerField(required=False, help_text="`run.running`: the attempt.")
    delta = serializers.CharField(required=False, allow_blank=True)
    tool_call = ToolCallSerializer(required=False)
    message = MessageSerializer(required=False)
    run = RunSerializer(required=False)


class ToolDecisionSerializer(StrictTypes[Any]):
    """Approve or deny calls waiting for approval."""

    tool_call_ids = serializers.ListField(
        child=serializers.CharField(min_length=1, trim_whitespace=False),
        required=False,
        allow_null=True,
        help_text="The calls to decide; all calls waiting for approval when omitted.",
    )
    stream = serializers.BooleanField(required=False, default=False)


class ToolOutputSerializer(StrictTypes[Any]):
    """The output of one client-side call."""

    tool_call_id = serializers.CharField(
        min_length=1, max_length=MAX_ID_CHARS, trim_whitespace=False
    )
    output = ToolOutputField(
        allow_null=True, help_text="Text, or any JSON value (stored as JSON text)."
    )
    is_error = serializers.BooleanField(required=False, default=False)


class SubmitToolOutputsSerializer(StrictTypes[Any]):
    """Outputs of client-side calls."""

    tool_outputs = serializers.ListField(child=ToolOutputSerializer(), min_length=1)
    stream = serializers.BooleanField(required=False, default=False)

    def validate_tool_outputs(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One output per call, each within ``MAX_MESSAGE_CHARS``."""
        ids = [item["tool_call_id"] for item in value]
        if len(set(ids)) != len(ids):
            raise serializers.ValidationError(
                "each tool_call_id may appear once.", code="duplicate_tool_output"
            )
        for index, item in enumerate(value):
            output = item["output"]
            if isinstance(output, str) and len(output) > conf.MAX_MESSAGE_CHARS:
                raise too_large(f"tool_outputs[{index}].output")
        return value


# Tools ------------------------------------------------------------------------


class ToolSerializer(serializers.Serializer[Any]):
    """A tool a run may offer."""

    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    parameters = serializers.DictField(help_text="JSON Schema of the arguments.")
    requires_approval = serializers.BooleanField()
    client_side = serializers.BooleanField(help_text="Run by the frontend: submit its output.")


__all__ = [
    "ORDERING_FIELDS",
    "ConversationListQuerySerializer",
    "ConversationSerializer",
    "ErrorSerializer",
    "MaxIterationsField",
    "MessageListQuerySerializer",
    "MessagePageSerializer",
    "MessageSerializer",
    "MessagesInputSerializer",
    "MetadataField",
    "RunCreateSerializer",
    "RunSerializer",
    "StreamEventSerializer",
    "StrictTypes",
    "SubmitToolOutputsSerializer",
    "ToolDecisionSerializer",
    "ToolOutputField",
    "ToolSerializer",
    "UserMessageField",
]
