"""Share links: what the owner sends and sees, and what a reader of a link sees.

A reader sees the title and the snapshot's messages in the message shape,
without what only the owner sees (:data:`SHARED_HIDDEN`: the run, usage,
cost, the owner's feedback and whether and why they hid a turn: hidden turns
are not shown at all), numbered within the snapshot; the conversation's id,
owner and metadata are not shown at all.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import serializers

from llm_conversations.api.representations import shared_message_data
from llm_conversations.api.serializers.common import StrictTypes
from llm_conversations.api.serializers.conversations import MessageSerializer
from llm_conversations.api.serializers.forks import message_id_field
from llm_conversations.models import ShareLink

__all__ = [
    "NewShareLinkSerializer",
    "ShareCreateSerializer",
    "ShareLinkSerializer",
    "SharedConversationSerializer",
    "SharedMessageSerializer",
]


class ShareCreateSerializer(StrictTypes[Any]):
    """Share a conversation: a link to its history through a message."""

    message_id = message_id_field(
        "The last message the link shows; the conversation's last message when omitted. "
        "Messages stored later never show. A message between a tool-call turn and its "
        "last result is refused (`inside_tool_group`).",
        required=False,
        allow_null=True,
    )
    expires_at = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="When the link stops working (in the future: `invalid_expiry`); never "
        "when omitted or null.",
    )


class ShareLinkSerializer(serializers.ModelSerializer[ShareLink]):
    """One of the owner's links; the token itself only in the answer that made it."""

    message_count = serializers.IntegerField(
        source="shown_count",
        read_only=True,
        help_text="How many messages the link shows now: those it named when made, less "
        "the ones hidden or removed since.",
    )
    is_active = serializers.SerializerMethodField(
        help_text="Whether the link works now: not revoked, not expired, its conversation "
        "not in the trash."
    )

    class Meta:
        model = ShareLink
        fields: tuple[str, ...] = (
            "id",
            "up_to_position",
            "message_count",
            "expires_at",
            "revoked_at",
            "is_active",
            "created_at",
        )
        read_only_fields: tuple[str, ...] = fields

    def get_is_active(self, obj: ShareLink) -> bool:
        return obj.is_usable(timezone.now())


class NewShareLinkSerializer(ShareLinkSerializer):
    """A link just made: with its token, shown this once (only its hash is stored)."""

    token = serializers.CharField(help_text="The link's secret; never shown again.")
    url = serializers.URLField(
        allow_null=True,
        help_text="The page a reader reads the snapshot on (`/shared/{token}/`); null when "
        "the project mounts no page (`llm_conversations.pages.urls`).",
    )
    api_url = serializers.URLField(help_text="Where a program reads the snapshot in the API.")

    class Meta(ShareLinkSerializer.Meta):
        fields = (*ShareLinkSerializer.Meta.fields, "token", "url", "api_url")
        read_only_fields = fields


class SharedMessageSerializer(MessageSerializer):
    """A message of a shared snapshot: a message without what only its owner sees
    (``representations.SHARED_HIDDEN``; a test keeps the two equal)."""

    run = None  # type: ignore[assignment]
    usage = None  # type: ignore[assignment]
    cost = None  # type: ignore[assignment]
    feedback = None  # type: ignore[assignment]
    hidden_at = None  # type: ignore[assignment]
    hidden_reason = None  # type: ignore[assignment]
    position = serializers.IntegerField(
        help_text="0-based index in the snapshot (a withdrawn turn leaves no gap)."
    )

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return shared_message_data(instance, instance["position"])


class SharedConversationSerializer(serializers.Serializer[Any]):
    """What a share link shows: the title and the snapshot's messages, oldest first."""

    title = serializers.CharField()
    shared_at = serializers.DateTimeField(help_text="When the link was made.")
    expires_at = serializers.DateTimeField(
        allow_null=True, help_text="When the link stops working; null: never."
    )
    messages = SharedMessageSerializer(many=True)
