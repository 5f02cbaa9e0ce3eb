"""The request body the AI SDK's ``useChat`` sends (its default HTTP transport), and the
events of the stream it reads back."""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework import serializers

from llm_conversations.api.serializers.common import BackgroundField, StrictTypes
from llm_conversations.api.serializers.messages import MessageTextField
from llm_conversations.api.serializers.runs import RunOptionsSerializer

__all__ = [
    "ChatRequestSerializer",
    "ChatStopSerializer",
    "UIMessageChunkEventSerializer",
    "UIMessageSerializer",
    "user_text",
]


def user_text(message: dict[str, Any]) -> str:
    """The text of a UI message: its ``text`` parts, joined by blank lines."""
    texts = [
        part["text"]
        for part in message["parts"]
        if part.get("type") == "text" and isinstance(part.get("text"), str)
    ]
    return "\n\n".join(texts)


class UIMessageSerializer(StrictTypes[Any]):
    """A UI message: its role and parts; only a user message's ``text`` parts are read."""

    # The AI SDK owns this shape and adds to it between versions.
    strict_fields = False

    id = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=200
    )
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


class ChatStopSerializer(StrictTypes[Any]):
    """``{assistantMessage, activeStreamId}``, as the AI SDK's stop guide posts it.

    ``activeStreamId`` (the run's id, the stream's ``messageId``) guards against
    a stale stop: another run is not cancelled. ``assistantMessage`` is
    accepted and not read: the run's log holds what was streamed, and that is
    what is kept.
    """

    assistantMessage = UIMessageSerializer(required=False, allow_null=True)
    activeStreamId = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=100
    )


class ChatRequestSerializer(RunOptionsSerializer):
    """``{id, messages, trigger, messageId}``, as ``DefaultChatTransport`` posts it.

    The last message is the new user turn (its text, ``text`` once validated)
    or decisions on a waiting run; the conversation's stored history is the one
    the model sees, whatever the other messages say. Fields added with the
    transport's ``body`` option choose the run's provider, tools and iteration
    limit.
    """

    request_fields: ClassVar[frozenset[str]] = frozenset(
        {"id", "messages", "trigger", "messageId", "text"}
    )
    # The transport's own fields and an app's `body` additions arrive together.
    strict_fields = False

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
    background = BackgroundField(
        help_text="Execute in a task worker and stream its log; `BACKGROUND_RUNS` when omitted.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A user turn's text within ``MAX_MESSAGE_CHARS``; it came from ``messages``."""
        last = attrs["messages"][-1]
        if last["role"] == "user":
            try:
                attrs["text"] = MessageTextField(allow_blank=True).run_validation(user_text(last))
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"messages": exc.detail}) from None
        return attrs

    def sent_names(self) -> dict[str, str]:
        # The run's user turn is the text of the last UI message.
        return {"message.content": "messages"}


class UIMessageChunkEventSerializer(serializers.Serializer[Any]):
    """One Server-Sent Event of the AI SDK's UI message stream protocol."""

    data = serializers.CharField(  # type: ignore[assignment]  # a field, not .data
        help_text="JSON text of one UI message chunk (`start`, `text-delta`, "
        "`tool-input-available`, ...), or `[DONE]` last."
    )
