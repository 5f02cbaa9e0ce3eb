"""The calls waiting for a person's decision, as ``GET waiting-calls/`` lists them."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from llm_conversations.api.serializers.conversations import ToolCallSerializer

__all__ = ["WaitingCallQuerySerializer", "WaitingCallSerializer"]


class WaitingCallSerializer(serializers.Serializer[Any]):
    """One call waiting for approval, with where it waits and what to decide it with."""

    conversation = serializers.UUIDField()
    conversation_title = serializers.CharField(allow_blank=True)
    run = serializers.UUIDField()
    tool_call = ToolCallSerializer()
    approval_digest = serializers.CharField(
        help_text="Send it with `approve/` or `deny/`: refused if the waiting calls changed."
    )
    waiting_since = serializers.DateTimeField()


class WaitingCallQuerySerializer(serializers.Serializer[Any]):
    """``?page=`` and ``?all=``, each valid when present."""

    page = serializers.IntegerField(required=False, min_value=1, help_text="1-based page.")
    all = serializers.BooleanField(
        required=False, default=False, help_text="Staff: every user's calls."
    )
