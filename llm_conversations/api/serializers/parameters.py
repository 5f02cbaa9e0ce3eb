"""A run's parameters: the fields that set them on ``POST runs/`` and their representation.

Fields check JSON types and the ranges the schema states (the numbers come
from :mod:`llm_conversations.core.parameters`); whether the provider can honour a
parameter, and a schema's validity, are the service's rules.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from llm_conversations.api.serializers.common import StrictTypes
from llm_conversations.api.serializers.messages import MessageTextField
from llm_conversations.core.parameters import (
    MAX_MODEL_CHARS,
    OUTPUT_TOKENS_RANGE,
    PARAMETER_NAMES,
    REASONING_EFFORTS,
    SEED_RANGE,
    TEMPERATURE_RANGE,
    TOOL_CHOICE_MODES,
    TOP_P_RANGE,
)
from llm_conversations.models import Run

__all__ = [
    "RUN_OPTION_NAMES",
    "ResponseFormatField",
    "RunParameterFields",
    "RunParametersSerializer",
    "StopField",
    "ToolChoiceField",
]

# The parameters kept in Run.parameters: instructions and model have fields of their own.
RUN_OPTION_NAMES = tuple(name for name in PARAMETER_NAMES if name not in ("instructions", "model"))


class StopField(serializers.JSONField):
    """One stop sequence or a non-empty list of them."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
            raise serializers.ValidationError("Must be a string or a non-empty list of strings.")
        return value


class ToolChoiceField(serializers.JSONField):
    """``"auto"``, ``"none"``, ``"required"``, or ``{"name": "<tool>"}``."""

    def to_internal_value(self, data: Any) -> Any:
        value: Any = super().to_internal_value(data)
        if isinstance(value, str) and value in TOOL_CHOICE_MODES:
            return value
        if isinstance(value, dict) and set(value) == {"name"} and isinstance(value["name"], str):
            return value
        raise serializers.ValidationError(
            'Must be "auto", "none", "required" or {"name": "<an offered tool>"}.'
        )


class ResponseFormatField(serializers.DictField):
    """A JSON Schema of an object, for the run's final answer."""


class RunParameterFields(StrictTypes[Any]):
    """The parameters of ``POST runs/``; omitted ones take the provider's defaults."""

    instructions = MessageTextField(
        required=False,
        min_length=1,
        help_text="A system prompt for this run: sent first on every model call, "
        "kept on the run, not added to the conversation.",
    )
    model = serializers.CharField(
        required=False,
        min_length=1,
        max_length=MAX_MODEL_CHARS,
        trim_whitespace=False,
        help_text="One of the provider entry's models (`MODEL`, `MODELS`); `MODEL` when omitted.",
    )
    temperature = serializers.FloatField(
        required=False, min_value=TEMPERATURE_RANGE[0], max_value=TEMPERATURE_RANGE[1]
    )
    top_p = serializers.FloatField(
        required=False, min_value=TOP_P_RANGE[0], max_value=TOP_P_RANGE[1]
    )
    max_output_tokens = serializers.IntegerField(
        required=False,
        min_value=OUTPUT_TOKENS_RANGE[0],
        max_value=OUTPUT_TOKENS_RANGE[1],
        help_text="The most tokens one model call may write.",
    )
    stop = StopField(required=False, help_text="Sequences that end the model's output.")
    seed = serializers.IntegerField(
        required=False, min_value=SEED_RANGE[0], max_value=SEED_RANGE[1]
    )
    reasoning_effort = serializers.ChoiceField(
        choices=list(REASONING_EFFORTS),
        required=False,
        help_text="How much the model reasons; each provider takes some of the values.",
    )
    tool_choice = ToolChoiceField(
        required=False,
        help_text="`auto`, `none`, `required` (a call on the run's first model call), "
        'or `{"name": ...}` (that offered tool, on the first model call).',
    )
    parallel_tool_calls = serializers.BooleanField(
        required=False, help_text="Whether one model turn may call several tools."
    )
    response_format = ResponseFormatField(
        required=False,
        help_text="A JSON Schema of an object: the final answer must match it; the parsed "
        "answer is the assistant message's `parsed`.",
    )


class RunParametersSerializer(serializers.Serializer[Run]):
    """A run's parameters besides `instructions` and `model`; `null` when not set."""

    temperature = serializers.FloatField(allow_null=True)
    top_p = serializers.FloatField(allow_null=True)
    max_output_tokens = serializers.IntegerField(allow_null=True)
    stop = serializers.ListField(child=serializers.CharField(), allow_null=True)
    seed = serializers.IntegerField(allow_null=True)
    reasoning_effort = serializers.CharField(allow_null=True)
    tool_choice = ToolChoiceField(allow_null=True)
    parallel_tool_calls = serializers.BooleanField(allow_null=True)
    response_format = serializers.DictField(allow_null=True)

    def to_representation(self, instance: Run) -> dict[str, Any]:
        stored = instance.parameters
        return {name: stored.get(name) for name in RUN_OPTION_NAMES}
