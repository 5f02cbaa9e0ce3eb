"""Answers to a waiting run: decisions on the calls waiting for approval, outputs of
client-side calls."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from llm_conversations.api.serializers.common import StrictTypes
from llm_conversations.api.serializers.messages import ToolOutputField
from llm_conversations.models import MAX_ID_CHARS, MAX_REASON_CHARS

__all__ = ["SubmitToolOutputsSerializer", "ToolDecisionSerializer", "ToolOutputSerializer"]


class ToolDecisionSerializer(StrictTypes[Any]):
    """Approve or deny calls waiting for approval."""

    tool_call_ids = serializers.ListField(
        child=serializers.CharField(min_length=1, trim_whitespace=False),
        required=False,
        allow_null=True,
        help_text="The calls to decide; all calls waiting for approval when omitted.",
    )
    reason = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=MAX_REASON_CHARS,
        help_text="Why, kept with the decision in the decision trail.",
    )
    digest = serializers.RegexField(
        r"^[0-9a-f]{64}\Z",
        required=False,
        allow_null=True,
        help_text=(
            "The run's `approval_digest` as the caller saw it: when the calls waiting "
            "changed since, the decision is refused (409 `stale_decision`)."
        ),
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
        """One output per call."""
        ids = [item["tool_call_id"] for item in value]
        if len(set(ids)) != len(ids):
            raise serializers.ValidationError(
                "each tool_call_id may appear once.", code="duplicate_tool_output"
            )
        return value

    def outputs(self) -> dict[str, dict[str, Any]]:
        """The outputs by call id, as ``ToolLoopService.answer`` takes them."""
        return {
            item["tool_call_id"]: {"output": item["output"], "is_error": item["is_error"]}
            for item in self.validated_data["tool_outputs"]
        }
