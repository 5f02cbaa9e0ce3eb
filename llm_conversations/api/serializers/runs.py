"""Runs of the tool loop, their events, and tools: input and responses."""

from __future__ import annotations

import datetime
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from llm_conversations.api.serializers.common import (
    BackgroundField,
    MaxIterationsField,
    NamesSentFields,
    QueryIntegerField,
    StrictTypes,
)
from llm_conversations.api.serializers.conversations import (
    MessageSerializer,
    ToolCallSerializer,
    UsageSerializer,
)
from llm_conversations.api.serializers.messages import UserMessageField
from llm_conversations.api.serializers.parameters import (
    RunParameterFields,
    RunParametersSerializer,
)
from llm_conversations.conf import BUSY_STRATEGIES
from llm_conversations.conversations.costs import run_cost
from llm_conversations.core.model_info import COST_DECIMALS, COST_DIGITS
from llm_conversations.models import (
    Decision,
    Run,
    RunStatus,
    WaitingCall,
    WaitReason,
)
from llm_conversations.runs.fallbacks import FALLBACK_REASONS

# Runs -------------------------------------------------------------------------


class RunOptionsSerializer(NamesSentFields, StrictTypes[Any]):
    """How a new run executes: its provider, its tools, its iteration limit.

    :meth:`start_options` are the validated options of ``ToolLoopService.start``
    (``background`` included): a body's every other field is in ``request_fields``.
    """

    request_fields: ClassVar[frozenset[str]] = frozenset({"message", "message_id", "stream"})

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
    if_busy = serializers.ChoiceField(
        choices=list(BUSY_STRATEGIES),
        required=False,
        help_text=(
            "While another run of the conversation is active: `reject` (409 "
            "`conversation_busy`), `enqueue` (202, the run `waiting` behind it), `interrupt` "
            "(cancel it and start this one) or `rollback` (cancel it, remove its turns, start "
            "this one); `BUSY_STRATEGY` when omitted. See docs/busy-conversations.md."
        ),
    )

    def start_options(self) -> dict[str, Any]:
        """The options of ``ToolLoopService.start`` the body set; omitted ones are the service's."""
        return {
            name: value
            for name, value in self.validated_data.items()
            if name not in self.request_fields and value is not None
        }


class RunStartFields(RunOptionsSerializer):
    """What a run answers and how it is executed (its parameters come after)."""

    message = UserMessageField(help_text="The user turn: text or a message object.")
    stream = serializers.BooleanField(
        required=False, default=False, help_text="Answer with Server-Sent Events."
    )
    background = BackgroundField(
        help_text=(
            "Queue the run for a task worker and answer 202 with the queued run (with "
            "`stream`: its events as they are logged); `BACKGROUND_RUNS` when omitted."
        ),
    )

    def sent_names(self) -> dict[str, str]:
        data = getattr(self, "_validated_data", None) or {}
        return UserMessageField.sent_names(data.get("message"))


class RunCreateSerializer(RunStartFields, RunParameterFields):
    """Start a run: store the user turn, then answer it with the tool loop."""

    context_strategy = serializers.ChoiceField(
        choices=["error", "truncate", "summarize"],
        required=False,
        help_text=(
            "What to do when the conversation exceeds the model's context window "
            "(docs/context.md); the provider entry's `CONTEXT_STRATEGY` when omitted."
        ),
    )


class RunRetrySerializer(StrictTypes[Any]):
    """Run a failed run again, from its stored turns, as a new attempt."""

    background = BackgroundField(
        help_text="Queue the retry for a task worker (202); `BACKGROUND_RUNS` when omitted.",
    )


class RunListQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of the run list."""

    cursor = serializers.CharField(
        required=False, help_text="The `next` or `previous` link's cursor."
    )
    limit = QueryIntegerField(
        required=False, min_value=1, max_value=100, help_text="Runs per page: 1 to 100 (20)."
    )


class RunEventsQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of a run's event stream."""

    after = QueryIntegerField(
        required=False,
        min_value=0,
        max_value=2**63 - 1,
        help_text="Send the events after this event id (as `Last-Event-ID` does).",
    )


class RunWaitingCallSerializer(ToolCallSerializer):
    """A call the run waits for, and why."""

    reason = serializers.ChoiceField(
        choices=WaitReason.values,
        help_text="`requires_approval`: approve or deny it; `client_side`: submit its output.",
    )

    def to_representation(self, instance: WaitingCall) -> dict[str, Any]:
        # A WaitingCall from Run.waiting_calls: the call's own wire form
        # (arguments as JSON text, or as the model sent them) plus the reason.
        return {**instance.call.to_wire(), "reason": instance.reason.value}


class RunErrorSerializer(serializers.Serializer[Run]):
    """Why a run failed."""

    type = serializers.CharField(source="error_type")
    message = serializers.CharField(source="error_message", allow_blank=True)


# Run timestamps are shown in UTC, as message timestamps are, whatever TIME_ZONE is.
_UTC = datetime.UTC


class RunContextSerializer(serializers.Serializer[Run]):
    """What the run's last model call sent, when its history was fitted to the window."""

    strategy = serializers.CharField(
        source="context_strategy",
        allow_blank=True,
        help_text="The run's own strategy; empty: the provider entry's.",
    )
    first_position = serializers.IntegerField(
        source="context_first_position",
        allow_null=True,
        help_text="Position of the first message sent after kept system messages (0: all).",
    )
    summary = serializers.IntegerField(
        source="context_summary_id",
        allow_null=True,
        help_text="The id of the summary sent in place of the earlier turns.",
    )
    estimated_tokens = serializers.IntegerField(source="context_estimated_tokens", allow_null=True)
    reported_tokens = serializers.IntegerField(
        source="context_reported_tokens",
        allow_null=True,
        help_text="The provider's count of the call's input tokens.",
    )


class RunCostField(serializers.DecimalField):
    """A run's cost as :func:`~llm_conversations.conversations.costs.run_cost` has it."""

    def to_representation(self, value: Run) -> str | None:  # type: ignore[override]
        cost = run_cost(value)
        return None if cost is None else super().to_representation(cost)


class RunSerializer(serializers.Serializer[Run]):
    """One execution of the tool loop."""

    id = serializers.UUIDField()
    conversation = serializers.UUIDField(source="conversation_id")
    status = serializers.ChoiceField(choices=RunStatus.values)
    termination_reason = serializers.SerializerMethodField(
        help_text="completed, max_iterations, content_filter, length, provider_error, "
        "invalid_output, context_overflow, timeout, worker_lost, error, cancelled, "
        "interrupted or rolled_back (a new run took its place)."
    )
    waits_for = serializers.UUIDField(
        source="waits_for_id",
        allow_null=True,
        help_text="The run this one waited behind when it was started with `if_busy: enqueue`.",
    )
    replaced = serializers.UUIDField(
        source="replaced_id",
        allow_null=True,
        help_text="The run this one interrupted (`if_busy`: `interrupt` or `rollback`).",
    )
    provider = serializers.CharField(allow_blank=True)
    model = serializers.CharField(allow_blank=True)
    answered_by = serializers.CharField(
        allow_blank=True,
        help_text="The provider entry that answered the last model call: `provider`, or one "
        "of its fallbacks when it failed (empty before the first answer).",
    )
    fallbacks = serializers.IntegerField(
        help_text="Model calls that moved to a fallback entry (each one a `run.fallback` event)."
    )
    tools = serializers.ListField(
        source="offered_tool_names", child=serializers.CharField(), help_text="Tools offered."
    )
    max_iterations = serializers.IntegerField()
    instructions = serializers.SerializerMethodField(
        help_text="The run's system prompt, sent first on every model call."
    )
    parameters = RunParametersSerializer(source="*")
    iterations = serializers.IntegerField(help_text="Model calls so far.")
    usage = UsageSerializer(source="*")
    cost = RunCostField(
        source="*",
        max_digits=COST_DIGITS,
        decimal_places=COST_DECIMALS,
        allow_null=True,
        help_text="US dollars its model calls cost (calls without prices count 0); `null` "
        "when it made calls and none had a price, as its turns' `cost` is.",
    )
    fitting = RunContextSerializer(source="*")
    waiting_calls = RunWaitingCallSerializer(many=True)
    approval_digest = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text="A digest of the calls waiting for approval (`null` when none): send it "
        "with a decision to have it refused if they changed meanwhile.",
    )
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

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_instructions(self, run: Run) -> str | None:
        """The run's instructions; ``None`` when it has none."""
        return run.instructions or None

    @extend_schema_field(RunErrorSerializer(allow_null=True))
    def get_error(self, run: Run) -> dict[str, Any] | None:
        """Why the run failed; ``None`` unless it did."""
        return RunErrorSerializer(run).data if run.error_type else None


class ToolProgressSerializer(serializers.Serializer[Any]):
    """A progress report of a tool while its call runs (``ToolContext.progress``)."""

    tool_call_id = serializers.CharField(help_text="The call the report is about.")
    text = serializers.CharField(allow_blank=True, help_text="At most 500 characters.")
    fraction = serializers.FloatField(
        allow_null=True, min_value=0, max_value=1, help_text="How much is done, 0 to 1."
    )


class StreamEventSerializer(serializers.Serializer[Any]):
    """The JSON object in the `data:` line of each Server-Sent Event.

    `text.delta` carries `delta`; `tool_call.started` carries `tool_call`;
    `tool_call.progress` carries `progress` (a tool's report while it runs);
    `tool_result.stored` and `message.stored` carry `message` (the stored
    row, with its id); `run.running` (with `attempt`), `run.fallback` (with
    `from_entry`, `to_entry`, `reason` and `status_code`), `run.requires_action`,
    `run.completed`, `run.failed` and `run.cancelled` carry `run` (the run as it
    stands when the event is sent).
    """

    run_id = serializers.UUIDField()
    attempt = serializers.IntegerField(required=False, help_text="`run.running`: the attempt.")
    from_entry = serializers.CharField(
        required=False, help_text="`run.fallback`: the provider entry that failed or is skipped."
    )
    to_entry = serializers.CharField(
        required=False, help_text="`run.fallback`: the provider entry that answers instead."
    )
    reason = serializers.ChoiceField(
        choices=FALLBACK_REASONS,
        required=False,
        help_text="`run.fallback`: why; `circuit_open`: skipped after repeated failures.",
    )
    status_code = serializers.IntegerField(
        required=False, help_text="`run.fallback`: the failed call's HTTP status, if any."
    )
    delta = serializers.CharField(required=False, allow_blank=True)
    tool_call = ToolCallSerializer(required=False)
    progress = ToolProgressSerializer(required=False)
    message = MessageSerializer(required=False)
    run = RunSerializer(required=False)
