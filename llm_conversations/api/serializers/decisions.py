"""The decision trail of a run, as its owner reads it."""

from __future__ import annotations

import datetime
from typing import Any

from rest_framework import serializers

from llm_conversations.api.serializers.common import QueryIntegerField
from llm_conversations.api.serializers.runs import RunListQuerySerializer
from llm_conversations.models import Decision, ToolDecision

__all__ = ["DecisionListQuerySerializer", "DecisionRecordSerializer"]


class DecisionRecordSerializer(serializers.Serializer[ToolDecision]):
    """One decision on a call that waited for approval: what, who, when, why, on what."""

    id = serializers.IntegerField()
    tool_call_id = serializers.CharField(source="call_id")
    tool_name = serializers.CharField()
    arguments = serializers.JSONField(
        help_text="The call's arguments when it was decided (the model's text, for a "
        "malformed call)."
    )
    decision = serializers.ChoiceField(choices=Decision.values)
    decided_by = serializers.SerializerMethodField(
        help_text="The id of the user who decided, as text; `null` when the run policy's rule "
        "decided (`by_rule`) or the user was deleted."
    )
    by_rule = serializers.BooleanField(
        help_text="The run policy's `decide_call` decided, before a person was asked."
    )
    reason = serializers.CharField(allow_blank=True, help_text="The reason given, if any.")
    digest = serializers.CharField(
        help_text="The run's `approval_digest` when it was decided: the calls that waited then."
    )
    decided_at = serializers.DateTimeField(default_timezone=datetime.UTC)

    def get_decided_by(self, decision: ToolDecision) -> str | None:
        """The decider's id; the row's own column, so no user is read."""
        user_id: Any = decision.decided_by_id
        return None if user_id is None else str(user_id)


class DecisionListQuerySerializer(RunListQuerySerializer):
    """Query parameters of a run's decision trail."""

    limit = QueryIntegerField(
        required=False, min_value=1, max_value=100, help_text="Decisions per page: 1 to 100 (50)."
    )
