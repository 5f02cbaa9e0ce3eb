"""Feedback on assistant messages: the rating a caller sends and sees."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from llm_conversations.api.serializers.common import StrictTypes
from llm_conversations.models import MAX_COMMENT_CHARS, Feedback, Rating

__all__ = ["FeedbackSerializer", "MessageFeedbackSerializer"]


# The feedback service checks the values, with its own codes (invalid_rating,
# too_large, invalid_text); the schema states them.
@extend_schema_field({"type": "integer", "enum": list(Rating.values)})
class RatingField(serializers.IntegerField):
    """``1`` (good) or ``-1`` (bad)."""


@extend_schema_field({"type": "string", "maxLength": MAX_COMMENT_CHARS})
class CommentField(serializers.CharField):
    """A comment of at most ``MAX_COMMENT_CHARS`` characters, kept as sent."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_blank=True, trim_whitespace=False, **kwargs)


class FeedbackSerializer(StrictTypes[Feedback], serializers.Serializer[Feedback]):
    """The caller's rating of an assistant message."""

    rating = RatingField(help_text="`1` (good) or `-1` (bad).")
    comment = CommentField(
        required=False,
        default="",
        help_text=f"Optional; at most {MAX_COMMENT_CHARS} characters. Omitted: empty.",
    )
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True, help_text="The last change.")


class MessageFeedbackSerializer(serializers.Serializer[Any]):
    """The caller's rating, as a message shows it."""

    rating = RatingField()
    comment = serializers.CharField(allow_blank=True)
