"""The request body the AI SDK's ``useChat`` sends (its default HTTP transport), and the
events of the stream it reads back."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from llm_conversations.api.serializers.common import StrictTypes
from llm_conversations.api.serializers.runs import RunOptionsSerializer

__all__ = ["ChatRequestSerializer", "UIMessageChunkEventSerializer", "UIMessageSerializer"]


class UIMessageSerializer(StrictTypes[Any]):
    """A UI message: its role and parts; only a user message's ``text`` parts are read."""

    id = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    # A pattern, not a choice: an enum named "role" would collide with the messages' one.
    role = serializers.RegexField(
        r"^(user|assistant)\Z",
        help_text="`user`: a new turn; `assistant`: decisions on the calls a run waits on.",
    )
    parts = serializers.ListField(
        child=serializers.DictField(),
        help_text='Parts such as `{"type": "text", "text": ...}`.',
    )
    metadata = serializers.JSONField(required=False, allow_null=True)


class ChatRequestSerializer(RunOptionsSerializer):
    """``{id, messages, trigger, messageId}``, as ``DefaultChatTransport`` posts it.

    The last message is the new user turn; the conversation's stored history
    is the one the model sees, whatever the other messages say. Fields added
    with the transport's ``body`` option choose the run's provider, tools and
    iteration limit.
    """

    id = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text="The chat's id."
    )
    messages = serializers.ListField(
        child=UIMessageSerializer(),
        min_length=1,
        help_text="The chat's UI messages; the last one is the new user turn.",
    )
    trigger = serializers.ChoiceField(
        choices=["submit-message"],
        required=False,
        default="submit-message",
        help_text="`submit-message` (regenerating is not offered by this endpoint).",
    )
    messageId = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, trim_whitespace=False
    )
    background = serializers.BooleanField(
        required=False,
        help_text="Execute in a task worker and stream its log; `BACKGROUND_RUNS` when omitted.",
    )


class UIMessageChunkEventSerializer(serializers.Serializer[Any]):
    """One Server-Sent Event of the AI SDK's UI message stream protocol."""

    data = serializers.CharField(  # type: ignore[assignment]  # a field, not .data
        help_text="JSON text of one UI message chunk (`start`, `text-delta`, "
        "`tool-input-available`, ...), or `[DONE]` last."
    )
