"""Conversations and their messages.

The message rules live in :mod:`llm_conversations.core.messages`. ``Message.clean()``
applies them by building the value object, and every rule that one row can
break is repeated as a ``CheckConstraint`` so no code path (``bulk_create``,
``QuerySet.update``, raw saves) can store an invalid row. The rules for each
item of ``tool_calls`` need to look inside a JSON array, which a portable CHECK
cannot; migration 0002 adds triggers for them on SQLite and PostgreSQL, and
migration 0009 the same for each item of ``content_parts``.
"""

from __future__ import annotations

import uuid
from dataclasses import fields
from typing import Any

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models
from django.db.models import Q
from django.db.models.lookups import Exact
from django.utils.translation import gettext_lazy as _

from llm_conversations.core.completions import FinishReason, Usage
from llm_conversations.core.content_parts import PART_ROLES
from llm_conversations.core.messages import ChatMessage, InvalidMessage, Role
from llm_conversations.core.model_info import COST_DECIMALS, COST_DIGITS
from llm_conversations.core.stored_rows import chat_message_from_row
from llm_conversations.models.expressions import JSONTypeOf


class TitleSource(models.TextChoices):
    """Who set a conversation's title; blank while nobody has."""

    USER = "user", _("set by the user")
    AUTO = "auto", _("automatic")


class Conversation(models.Model):
    """A conversation; its turns are :class:`Message` rows ordered by ``position``.

    ``title_source`` says who set the title: an automatic title is written
    only while the title is empty and no user has set one (an empty title a
    user chose included), by a conditional ``UPDATE`` (see
    :mod:`llm_conversations.conversations.titles`).

    ``archived_at`` and ``trashed_at`` are its place in its life
    (:mod:`llm_conversations.conversations.lifecycle`): archived, it leaves the
    list but works as before; trashed, it is read-only until restored, and
    purged ``TRASH_RETENTION_DAYS`` after it was trashed.
    """

    id = models.UUIDField(_("ID"), primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="llm_conversations",
        verbose_name=_("owner"),
    )
    title = models.CharField(_("title"), max_length=200, blank=True)
    title_source = models.CharField(
        _("title source"), max_length=8, choices=TitleSource, blank=True, default=""
    )
    metadata = models.JSONField(_("metadata"), default=dict, blank=True)
    # A fork holds copies of the first forked_at_position messages of forked_from
    # (runs/forks.py); the position stays when the source is deleted.
    forked_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="forks",
        verbose_name=_("forked from"),
    )
    forked_at_position = models.PositiveIntegerField(
        _("forked at position"), null=True, blank=True, editable=False
    )
    # Maintained by the conversation store: the next message's position.
    message_count = models.PositiveIntegerField(_("message count"), default=0, editable=False)
    archived_at = models.DateTimeField(_("archived at"), null=True, blank=True, editable=False)
    trashed_at = models.DateTimeField(_("trashed at"), null=True, blank=True, editable=False)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"], name="llmconv_owner_updated"),
            # The default list: neither archived nor trashed, newest first.
            models.Index(
                fields=["owner", "-updated_at"],
                condition=Q(archived_at__isnull=True, trashed_at__isnull=True),
                name="llmconv_owner_active",
            ),
            # The trash: listed, and purged once old enough.
            models.Index(
                fields=["trashed_at"],
                condition=Q(trashed_at__isnull=False),
                name="llmconv_trashed",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(forked_from__isnull=True) | Q(forked_at_position__isnull=False),
                name="llmconv_conversation_fork_position",
                violation_error_code="missing_fork_position",
            ),
        ]

    def __str__(self) -> str:
        return self.title or str(_("Conversation %(id)s") % {"id": self.id})


# The columns that hold a ChatMessage, named as its dict form names them.
MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "is_error")
# The columns chat_message_from_row reads: the dict form's, the content
# parts, which the stored form keeps under "content", and the reasoning.
MESSAGE_COLUMNS = (*MESSAGE_FIELDS, "content_parts", "reasoning")
# The token columns of an assistant turn, named as the fields of core's Usage.
USAGE_COLUMNS = tuple(column.name for column in fields(Usage))
# The longest call id a tool turn can store (the tool_call_id column).
MAX_ID_CHARS = 255

ROLE_CHOICES = [(role.value, role.value) for role in Role]
FINISH_REASON_CHOICES = [(reason.value, reason.value) for reason in FinishReason]


class Message(models.Model):
    """One stored turn of a conversation, for any role."""

    id = models.UUIDField(_("ID"), primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="messages",
        verbose_name=_("conversation"),
    )
    position = models.PositiveIntegerField(_("position"))
    role = models.CharField(_("role"), max_length=16, choices=ROLE_CHOICES)
    # The text; for a message of content parts, the text of its text parts.
    content = models.TextField(_("content"), blank=True)
    # User and tool turns with images or files: the stored parts, in order;
    # NULL for plain text. The attachments they show are indexed below.
    content_parts = models.JSONField(_("content parts"), null=True, blank=True)
    attachments = models.ManyToManyField(
        "llm_conversations.Attachment",
        through="llm_conversations.MessageAttachment",
        related_name="messages",
        blank=True,
        verbose_name=_("attachments"),
    )
    # Assistant turns only: ToolCall stored forms, arguments decoded.
    tool_calls = models.JSONField(_("tool calls"), null=True, blank=True)
    # NULL (not "") unless a tool turn, so "absent" and "empty" stay distinct.
    tool_call_id = models.CharField(  # noqa: DJ001
        _("tool call id"), max_length=MAX_ID_CHARS, null=True, blank=True
    )
    is_error = models.BooleanField(_("is error"), default=False)
    # Assistant turns only: the model's reasoning state, Reasoning stored forms
    # (core/reasoning.py), replayed only to the provider that made it.
    reasoning = models.JSONField(_("reasoning"), null=True, blank=True)
    run = models.ForeignKey(
        "llm_conversations.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="messages",
        verbose_name=_("run"),
    )
    provider = models.CharField(_("provider"), max_length=100, blank=True)
    model = models.CharField(_("model"), max_length=200, blank=True)
    # Assistant turns a provider answered: why the model stopped.
    finish_reason = models.CharField(
        _("finish reason"), max_length=20, blank=True, choices=FINISH_REASON_CHOICES
    )
    input_tokens = models.PositiveIntegerField(_("input tokens"), null=True, blank=True)
    output_tokens = models.PositiveIntegerField(_("output tokens"), null=True, blank=True)
    total_tokens = models.PositiveIntegerField(_("total tokens"), null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(_("cached tokens"), null=True, blank=True)
    cache_write_tokens = models.PositiveIntegerField(_("cache write tokens"), null=True, blank=True)
    reasoning_tokens = models.PositiveIntegerField(_("reasoning tokens"), null=True, blank=True)
    # Assistant answers of a run with a response_format: the answer read as
    # JSON, once it matched the schema (an object; NULL otherwise).
    parsed = models.JSONField(_("parsed answer"), null=True, blank=True)
    # Dollars, from the usage and the prices in force when stored; None where
    # the model has no prices (docs/costs.md).
    cost = models.DecimalField(
        _("cost"), max_digits=COST_DIGITS, decimal_places=COST_DECIMALS, null=True, blank=True
    )
    metadata = models.JSONField(_("metadata"), default=dict, blank=True)
    # Hidden from the transcript the model sees, kept for audit
    # (conversations/lifecycle.py hides a tool group whole).
    hidden_at = models.DateTimeField(_("hidden at"), null=True, blank=True, editable=False)
    hidden_reason = models.CharField(_("hidden reason"), max_length=500, blank=True, editable=False)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        ordering = ["conversation", "position"]
        constraints = [
            # Also the index that reads a conversation in order.
            models.UniqueConstraint(
                fields=["conversation", "position"],
                name="llmconv_message_position_unique",
                violation_error_code="duplicate_position",
            ),
            models.CheckConstraint(
                condition=Q(role__in=[r.value for r in Role]),
                name="llmconv_message_role_valid",
                violation_error_code="invalid_role",
            ),
            models.CheckConstraint(
                condition=Q(tool_calls__isnull=True) | Q(role=Role.ASSISTANT),
                name="llmconv_message_tool_calls_assistant_only",
                violation_error_code="tool_calls_not_allowed",
            ),
            # A non-empty JSON array whose first item is a call with an id;
            # the per-item rules need the value object (see Message.clean).
            models.CheckConstraint(
                condition=Q(tool_calls__isnull=True)
                | (
                    Q(Exact(JSONTypeOf("tool_calls"), "array")) & Q(tool_calls__0__id__isnull=False)
                ),
                name="llmconv_message_tool_calls_nonempty",
                violation_error_code="empty_tool_calls",
            ),
            models.CheckConstraint(
                condition=Q(tool_call_id__isnull=True) | Q(role=Role.TOOL),
                name="llmconv_message_tool_call_id_tool_only",
                violation_error_code="tool_call_id_not_allowed",
            ),
            models.CheckConstraint(
                condition=~Q(role=Role.TOOL)
                | (Q(tool_call_id__isnull=False) & ~Q(tool_call_id="")),
                name="llmconv_message_tool_call_id_required",
                violation_error_code="missing_tool_call_id",
            ),
            models.CheckConstraint(
                condition=~Q(content="")
                | Q(role__in=[Role.TOOL, Role.ASSISTANT])
                | Q(content_parts__isnull=False),
                name="llmconv_message_content_required",
                violation_error_code="missing_content",
            ),
            models.CheckConstraint(
                condition=Q(content_parts__isnull=True) | Q(role__in=list(PART_ROLES)),
                name="llmconv_message_content_parts_roles",
                violation_error_code="content_part_not_allowed",
            ),
            # A non-empty JSON array whose first item has a type; the per-item
            # rules (which part types each role may carry) are triggers (0009).
            models.CheckConstraint(
                condition=Q(content_parts__isnull=True)
                | (
                    Q(Exact(JSONTypeOf("content_parts"), "array"))
                    & Q(content_parts__0__type__isnull=False)
                ),
                name="llmconv_message_content_parts_nonempty",
                violation_error_code="missing_content",
            ),
            models.CheckConstraint(
                condition=Q(reasoning__isnull=True) | Q(role=Role.ASSISTANT),
                name="llmconv_message_reasoning_assistant_only",
                violation_error_code="reasoning_not_allowed",
            ),
            # A non-empty JSON array whose first item names its provider; the
            # per-part rules need the value object (see Message.clean).
            models.CheckConstraint(
                condition=Q(reasoning__isnull=True)
                | (
                    Q(Exact(JSONTypeOf("reasoning"), "array"))
                    & Q(reasoning__0__provider__isnull=False)
                ),
                name="llmconv_message_reasoning_nonempty",
                violation_error_code="empty_reasoning",
            ),
            models.CheckConstraint(
                condition=Q(is_error=False) | Q(role=Role.TOOL),
                name="llmconv_message_is_error_tool_only",
                violation_error_code="is_error_not_allowed",
            ),
            models.CheckConstraint(
                condition=Q(role=Role.ASSISTANT)
                | Q(
                    provider="",
                    model="",
                    finish_reason="",
                    input_tokens__isnull=True,
                    output_tokens__isnull=True,
                    total_tokens__isnull=True,
                    cached_tokens__isnull=True,
                    cache_write_tokens__isnull=True,
                    reasoning_tokens__isnull=True,
                ),
                name="llmconv_message_usage_assistant_only",
                violation_error_code="usage_not_allowed",
            ),
            models.CheckConstraint(
                condition=Q(parsed__isnull=True) | Q(role=Role.ASSISTANT),
                name="llmconv_message_parsed_assistant_only",
                violation_error_code="parsed_not_allowed",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.position} {self.role}"

    def to_chat_message(self) -> ChatMessage:
        """The value object of this row (raises :class:`InvalidMessage`)."""
        return chat_message_from_row(*(getattr(self, name) for name in MESSAGE_COLUMNS))

    @classmethod
    def fields_from_chat_message(cls, message: ChatMessage) -> dict[str, Any]:
        """Model field values that store ``message``.

        Content parts go to ``content_parts`` and their text to ``content``.
        """
        fields = message.to_stored()
        if message.parts is None:
            return fields
        return {**fields, "content": message.content, "content_parts": fields["content"]}

    def clean(self) -> None:
        """Apply the message rules and report a violation on its field."""
        super().clean()
        try:
            self.to_chat_message()
        except InvalidMessage as exc:
            field = (exc.field or "").split(".")[0].split("[")[0]
            if field == "content" and self.content_parts is not None:
                field = "content_parts"
            if field not in MESSAGE_COLUMNS:
                field = NON_FIELD_ERRORS
            raise ValidationError({field: ValidationError(exc.message, code=exc.code)}) from None
        if self.role != Role.ASSISTANT and (
            self.provider
            or self.model
            or self.finish_reason
            or any(
                value is not None
                for value in (
                    self.input_tokens,
                    self.output_tokens,
                    self.total_tokens,
                    self.cached_tokens,
                    self.cache_write_tokens,
                    self.reasoning_tokens,
                )
            )
        ):
            raise ValidationError(
                {
                    NON_FIELD_ERRORS: ValidationError(
                        _(
                            "Provider, model, finish reason and token usage belong to assistant messages only."
                        ),
                        code="usage_not_allowed",
                    )
                }
            )
        if self.role != Role.ASSISTANT and self.parsed is not None:
            raise ValidationError(
                {
                    "parsed": ValidationError(
                        _("Only assistant messages have a parsed answer."),
                        code="parsed_not_allowed",
                    )
                }
            )
