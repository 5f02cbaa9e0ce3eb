"""Conversations and their messages: input, responses, query parameters."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from llm_conversations.api.representations import message_data, message_row
from llm_conversations.api.serializers.common import (
    MetadataField,
    QueryIntegerField,
    StrictTypes,
)
from llm_conversations.api.serializers.feedback import MessageFeedbackSerializer
from llm_conversations.api.serializers.messages import ROLE_CHOICES
from llm_conversations.conversations.lifecycle import HIDDEN_REASON_CHARS
from llm_conversations.conversations.search import MAX_SEARCH_CHARS
from llm_conversations.core.completions import FinishReason
from llm_conversations.core.model_info import COST_DECIMALS, COST_DIGITS, cost_text
from llm_conversations.core.reasoning import ReasoningKind
from llm_conversations.models import (
    Conversation,
    Message,
    TitleSource,
)

# Conversations ----------------------------------------------------------------

ORDERING_FIELDS = ("created_at", "updated_at", "title", "message_count")
_ORDER_ONE = f"-?(?:{'|'.join(ORDERING_FIELDS)})"
ORDERING_PATTERN = f"^{_ORDER_ONE}(?:,{_ORDER_ONE})*$"


class ConversationSerializer(StrictTypes[Conversation], serializers.ModelSerializer[Conversation]):
    """A conversation with its message count, last activity and active run."""

    metadata = MetadataField(
        required=False,
        help_text="Free-form JSON object of any values; at most `MAX_METADATA_KEYS` keys.",
    )
    active_run = serializers.UUIDField(
        read_only=True, allow_null=True, help_text="The run in progress, if any."
    )
    updated_at = serializers.DateTimeField(
        read_only=True, help_text="Last activity: the last appended message or edit."
    )
    forked_from: serializers.PrimaryKeyRelatedField[Conversation] = (
        serializers.PrimaryKeyRelatedField(
            read_only=True,
            allow_null=True,
            help_text="The conversation this one is a fork of (null once that one is deleted).",
        )
    )
    forked_at_position = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="A fork: how many messages of `forked_from` it copied.",
    )
    cost = serializers.SerializerMethodField(
        help_text="US dollars its assistant turns cost (turns without prices count 0)."
    )
    title_source = serializers.ChoiceField(
        choices=TitleSource.choices,
        read_only=True,
        allow_null=True,
        help_text=(
            "Who set the title: `user` (a client sent `title`), `auto` (an automatic "
            "title), or null (nobody yet)."
        ),
    )

    archived_at = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="When it was archived (`archive/`), or null: archived, it leaves the list.",
    )
    trashed_at = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text=(
            "When it went to the trash (`DELETE`), or null: read-only until `restore/`, "
            "purged `TRASH_RETENTION_DAYS` later."
        ),
    )

    class Meta:
        model = Conversation
        fields = [
            "id",
            "title",
            "title_source",
            "metadata",
            "message_count",
            "cost",
            "active_run",
            "forked_from",
            "forked_at_position",
            "archived_at",
            "trashed_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = [
            "id",
            "message_count",
            "forked_from",
            "forked_at_position",
            "created_at",
        ]
        # Kept as sent, as every string is: trimmed, a title over the schema's
        # maxLength by a space would be taken.
        extra_kwargs = {"title": {"trim_whitespace": False}}

    def to_representation(self, instance: Conversation) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["title_source"] = data["title_source"] or None
        return data

    @extend_schema_field(
        serializers.DecimalField(max_digits=COST_DIGITS, decimal_places=COST_DECIMALS)
    )
    def get_cost(self, instance: Conversation) -> str | None:
        """The ``cost`` annotation of ``services.costs.with_cost``; a conversation
        just created has none and has cost nothing."""
        return cost_text(getattr(instance, "cost", Decimal(0)))


# Messages ---------------------------------------------------------------------


class FunctionCallSerializer(serializers.Serializer[Any]):
    """The function a call names, with its arguments as JSON text."""

    name = serializers.CharField()
    arguments = serializers.CharField(
        allow_blank=True, help_text='JSON text of the arguments object (`"{}"` when empty).'
    )


class ToolCallSerializer(serializers.Serializer[Any]):
    """A tool call in the OpenAI form."""

    id = serializers.CharField()
    type = serializers.ChoiceField(choices=["function"])
    function = FunctionCallSerializer()


class UsageSerializer(serializers.Serializer[Any]):
    """Token usage (characters for the echo backend)."""

    input_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    total_tokens = serializers.IntegerField(allow_null=True)
    cached_tokens = serializers.IntegerField(allow_null=True)
    cache_write_tokens = serializers.IntegerField(allow_null=True)
    reasoning_tokens = serializers.IntegerField(allow_null=True)


class ShownReasoningSerializer(serializers.Serializer[Any]):
    """A piece of reasoning text: what kind of reasoning it is, and the text."""

    kind = serializers.ChoiceField(choices=[kind.value for kind in ReasoningKind])
    text = serializers.CharField()


class MessageSerializer(serializers.Serializer[Message]):
    """A stored message: the `ChatMessage.to_wire()` fields plus stored ones.

    `tool_calls` is present on assistant turns with calls (their `content` may
    then be `null`), `tool_call_id` on tool turns.
    """

    id = serializers.UUIDField()
    position = serializers.IntegerField(help_text="0-based index in the conversation.")
    role = serializers.ChoiceField(choices=ROLE_CHOICES)
    # Any JSON value, null included (allow_null would make an ambiguous oneOf).
    content = serializers.JSONField(
        help_text=(
            "The text (`null` beside tool calls); for user and tool turns with images or "
            'files, a list of content parts: `{"type": "text", "text"}`, '
            '`{"type": "image" | "file", "attachment_id"}`.'
        ),
    )
    tool_calls = ToolCallSerializer(many=True, required=False)
    tool_call_id = serializers.CharField(required=False)
    is_error = serializers.BooleanField(help_text="A tool result that reports a failure.")
    run = serializers.UUIDField(allow_null=True, help_text="The run that stored this turn.")
    created_at = serializers.DateTimeField()
    model = serializers.CharField(allow_null=True, help_text="Assistant turns: the model.")
    finish_reason = serializers.ChoiceField(
        choices=[reason.value for reason in FinishReason],
        allow_null=True,
        help_text=(
            "Assistant turns a provider answered: why the model stopped. An empty "
            'reply (`content` `""`, no calls) with `content_filter` is a refusal.'
        ),
    )
    usage = UsageSerializer(allow_null=True, help_text="Assistant turns: token usage.")
    parsed = serializers.DictField(
        allow_null=True,
        help_text="The answer of a run with a `response_format`, read as JSON once it "
        "matched the schema; `null` otherwise.",
    )
    cost = serializers.DecimalField(
        max_digits=COST_DIGITS,
        decimal_places=COST_DECIMALS,
        allow_null=True,
        help_text=(
            "Assistant turns: US dollars the call cost at the prices in force when it was "
            "stored; null where the model has no prices."
        ),
    )
    feedback = MessageFeedbackSerializer(
        allow_null=True,
        help_text="The caller's rating of this assistant turn, or null (`PUT feedback/` sets it).",
    )
    reasoning = ShownReasoningSerializer(
        many=True,
        allow_null=True,
        help_text=(
            "Assistant turns: the model's reasoning text, when the `SHOW_REASONING` setting "
            "is on; null otherwise. Opaque reasoning data is never shown."
        ),
    )
    compacted_by = serializers.CharField(
        allow_null=True,
        help_text=(
            "Assistant turns: the provider backend whose compacted state of the turns so "
            "far this turn carries (the `compact` context strategy), or null. Its later "
            "calls start at the user turn before it; every turn stays stored and listed."
        ),
    )
    hidden_at = serializers.DateTimeField(
        allow_null=True,
        help_text=(
            "When it was hidden from the model (`hide/`), or null. A hidden message is "
            "kept and listed here, but no model call is sent it."
        ),
    )
    hidden_reason = serializers.CharField(
        allow_blank=True, help_text="Why it was hidden, as `hide/` was told (or empty)."
    )

    def to_representation(self, instance: Message) -> dict[str, Any]:
        return message_data(message_row(instance))


# Answered by the message list: one page object, not the array a "list" action
# usually answers.
@extend_schema_serializer(many=False)
class MessagePageSerializer(serializers.Serializer[Any]):
    """A page of messages, as OpenAI's Conversations API lists items."""

    data = MessageSerializer(many=True)  # type: ignore[assignment]  # a field, not .data
    first_id = serializers.UUIDField(allow_null=True)
    last_id = serializers.UUIDField(allow_null=True)
    has_more = serializers.BooleanField()


class PageQuerySerializer(serializers.Serializer[Any]):
    """``?page=`` and ``?page_size=`` of a list of conversations, each valid when present."""

    page = QueryIntegerField(required=False, min_value=1, help_text="1-based page.")
    page_size = QueryIntegerField(
        required=False, min_value=1, max_value=100, help_text="Page size, 1-100 (default 20)."
    )


class ConversationStateQuerySerializer(serializers.Serializer[Any]):
    """Which conversations of the list: by default those neither archived nor trashed."""

    archived = serializers.ChoiceField(
        choices=["true", "false", "all"],
        required=False,
        help_text=(
            "`false` (the default): not archived; `true`: archived only; `all`: both. "
            "With `trashed=true` the default is `all`."
        ),
    )
    trashed = serializers.BooleanField(
        required=False,
        default=False,
        help_text="`true`: the trash only (restorable until purged); `false` (the default): "
        "no trashed conversation.",
    )


class ConversationListQuerySerializer(ConversationStateQuerySerializer, PageQuerySerializer):
    """Query parameters of the conversation list; each, when present, must be valid."""

    search = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=MAX_SEARCH_CHARS,
        # The limit is the schema's, on the text as sent (the search reads it so).
        trim_whitespace=False,
        help_text=(
            "Text to find: in the title (every word) or in the text of a user turn, answer "
            "or tool result. PostgreSQL: full-text search in web search syntax, best "
            "matches first unless `ordering` is given. See docs/feedback-search-titles.md."
        ),
    )
    ordering = serializers.RegexField(
        ORDERING_PATTERN,
        required=False,
        help_text="Comma-separated fields, `-` first for descending: "
        + ", ".join(f"`{name}`" for name in ORDERING_FIELDS)
        + ".",
    )


class ConversationDeleteQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of ``DELETE /conversations/{id}/``."""

    permanent = serializers.BooleanField(
        required=False,
        default=False,
        help_text="`true`: delete for good, from the trash or not; otherwise move to the trash.",
    )


class HideMessageSerializer(StrictTypes[Any], serializers.Serializer[Any]):
    """Why a message is hidden from the model (optional)."""

    reason = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=HIDDEN_REASON_CHARS,
        help_text=f"Optional, at most {HIDDEN_REASON_CHARS} characters; kept for audit.",
    )


class MessageListQuerySerializer(serializers.Serializer[Any]):
    """Query parameters of the message list; each, when present, must be valid."""

    after = serializers.UUIDField(
        required=False, help_text="A message id: list the messages after it in `order`."
    )
    limit = QueryIntegerField(
        required=False, default=20, min_value=1, max_value=100, help_text="Page size, 1-100."
    )
    order = serializers.ChoiceField(
        choices=["asc", "desc"],
        required=False,
        default="desc",
        help_text="`asc`: oldest first; `desc`: newest first.",
    )
    search = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=MAX_SEARCH_CHARS,
        # The limit is the schema's, on the text as sent (the search reads it so).
        trim_whitespace=False,
        help_text=(
            "Only the user turns, answers and tool results whose text this finds, "
            "as in the conversation search. See docs/feedback-search-titles.md."
        ),
    )
