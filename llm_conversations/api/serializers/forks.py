"""Forks of a conversation, edits and regenerations: their request bodies.

Edits and regenerations take every option of ``POST runs/`` (they start a
run), so options added there reach them too.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from llm_conversations.api.serializers.common import StrictTypes
from llm_conversations.api.serializers.messages import UserMessageField
from llm_conversations.api.serializers.runs import RunCreateSerializer

__all__ = ["EditSerializer", "ForkCreateSerializer", "RegenerateSerializer"]


# A message id as uuid.UUID reads it, stated in the schema (a bare "format: uuid"
# is not enforced by every validator).
_HEX = "[0-9a-fA-F]"
MESSAGE_ID_PATTERN = f"^{_HEX}{{8}}-?{_HEX}{{4}}-?{_HEX}{{4}}-?{_HEX}{{4}}-?{_HEX}{{12}}$"


def message_id_field(
    help_text: str, *, required: bool = True, allow_null: bool = False
) -> serializers.RegexField:
    """A message id in a request body."""
    return serializers.RegexField(
        MESSAGE_ID_PATTERN, required=required, allow_null=allow_null, help_text=help_text
    )


class ForkCreateSerializer(StrictTypes[Any]):
    """Fork a conversation: a new one holding copies of its history through a message."""

    message_id = message_id_field(
        "The last message the fork holds; the whole history when omitted. A message "
        "between a tool-call turn and its last result is refused (`inside_tool_group`).",
        required=False,
        allow_null=True,
    )
    title = serializers.CharField(
        required=False,
        max_length=200,
        allow_blank=True,
        trim_whitespace=False,
        help_text="The fork's title (the user's); the source's when omitted.",
    )


class EditSerializer(RunCreateSerializer):
    """Edit a user turn: fork before it, then start a run with the new text."""

    message_id = message_id_field("The user turn to replace.")
    message = UserMessageField(help_text="The new user turn: text or a message object.")


class RegenerateSerializer(RunCreateSerializer):
    """Answer again: fork before the user turn an answer replies to, and answer it anew."""

    message_id = message_id_field("The assistant turn to make again.")
    message = None  # type: ignore[assignment]  # the user turn is the one answered before
