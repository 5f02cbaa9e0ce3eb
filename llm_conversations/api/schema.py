"""OpenAPI descriptions that serializers cannot express on their own.

Limits are not declared here: each is a validator of the field it bounds
(:class:`~llm_conversations.api.serializers.common.SizeLimit`), which drf-spectacular
states by itself on fields of one JSON type. The extensions below describe
fields of more than one type (one message or a list, text or an object, any
JSON value), reading the field's own limit (:func:`declared_limit`) for the
branch it bounds.

An event stream is described one event at a time: ``event`` names it and
``data`` is JSON text whose decoded form is a ``StreamEvent`` object
(``contentMediaType`` / ``contentSchema``, which schema-driven tools check).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.settings import spectacular_settings
from rest_framework import serializers

from llm_conversations.api.serializers import (
    MessageContentField,
    MessageInputSerializer,
    MessagesInputSerializer,
    StreamEventSerializer,
    ToolOutputField,
    UserMessageField,
    declared_limit,
)
from llm_conversations.api.serializers.common import StrictTypes
from llm_conversations.api.serializers.messages import MessageListField
from llm_conversations.api.serializers.parameters import (
    ResponseFormatField,
    StopField,
    ToolChoiceField,
)
from llm_conversations.api.streams.ai_sdk import AI_SDK_FORMAT, PROTOCOL_HEADER, PROTOCOL_VERSION
from llm_conversations.conf import conf
from llm_conversations.core.parameters import TOOL_CHOICE_MODES
from llm_conversations.models import RunEventType

__all__ = [
    "AI_SDK_STREAM_NOTE",
    "ServerSentEventSerializer",
    "describe_run_events",
]

AI_SDK_STREAM_NOTE = (
    f"With `?format={AI_SDK_FORMAT}` or the header `{PROTOCOL_HEADER}: {PROTOCOL_VERSION}` "
    "the stream is the AI SDK's UI message stream protocol instead: the response carries "
    f"`{PROTOCOL_HEADER}: {PROTOCOL_VERSION}`, each `data:` is one UI message chunk (JSON) "
    "and the stream ends with `data: [DONE]`. See docs/ai-sdk.md."
)


def describe_run_events() -> str:
    """The events of a run's stream, in order, as Markdown for the schema's descriptions."""
    progress = ", ".join(f"`{name}`" for name in RunEventType if not name.ends_stream)
    ending = ", ".join(f"`{name}`" for name in RunEventType if name.ends_stream)
    return f"{progress}, then one of {ending}"


class EventDataField(serializers.CharField):
    """The ``data:`` line of an event: JSON text of a ``StreamEvent``."""


class EventDataFieldExtension(OpenApiSerializerFieldExtension):
    """Describes :class:`EventDataField` as JSON text with a schema for its content."""

    target_class = EventDataField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        component = auto_schema.resolve_serializer(StreamEventSerializer, direction)
        described = {"type": "string", "description": "JSON text of a `StreamEvent` object."}
        # Open API 3.0 has no keywords for the content of a string: extensions then.
        prefix = "x-" if spectacular_settings.OAS_VERSION.startswith("3.0") else ""
        return {
            **described,
            f"{prefix}contentMediaType": "application/json",
            f"{prefix}contentSchema": component.ref,
        }


class ServerSentEventSerializer(serializers.Serializer[Any]):
    """One Server-Sent Event of a run."""

    event = serializers.ChoiceField(choices=[name.value for name in RunEventType])
    data = EventDataField()  # type: ignore[assignment]  # a field, not .data


def _described(field: Any, schema: dict[str, Any]) -> dict[str, Any]:
    help_text = getattr(field, "help_text", None)
    return {**schema, "description": str(help_text)} if help_text else schema


def _text(field: Any, description: str | None = None) -> dict[str, Any]:
    """The text branch of a field of more than one type, within the field's limit."""
    schema: dict[str, Any] = {"type": "string"}
    if description:
        schema["description"] = description
    limit = declared_limit(field)
    return schema if limit is None else {**schema, "maxLength": limit}


_CONTENT_PARTS: dict[str, Any] = {
    "type": "array",
    "description": (
        "Content parts (user and tool turns): text parts, and images and files by the id "
        "of an uploaded attachment (docs/attachments.md)."
    ),
    "minItems": 1,
    "items": {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["text", "image", "file"]},
            "text": {"type": "string"},
            "attachment_id": {"type": "string", "format": "uuid"},
        },
        "required": ["type"],
    },
}


class MessageContentFieldExtension(OpenApiSerializerFieldExtension):
    """A message's content: text within its limit, or content parts."""

    target_class = MessageContentField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return {"oneOf": [_text(self.target), _CONTENT_PARTS]}


class ToolOutputFieldExtension(OpenApiSerializerFieldExtension):
    """Any JSON value; ``maxLength`` constrains only a text output, as the field does."""

    target_class = ToolOutputField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        others = [{"type": name} for name in ("object", "array", "number", "boolean")]
        return {"anyOf": [_text(self.target), *others]}


class UserMessageFieldExtension(OpenApiSerializerFieldExtension):
    """A run's user turn: its text (within the text field's limit) or a message object."""

    target_class = UserMessageField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        field: UserMessageField = self.target
        text = _text(field.text, "The text of a user message.")
        message = auto_schema.resolve_serializer(field.message, direction)
        return {"oneOf": [text, message.ref]}


class StrictTypesExtension(OpenApiSerializerExtension):
    """A request body that refuses unknown fields says so: ``additionalProperties: false``."""

    target_class = StrictTypes
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_basic_serializer(self.target, direction)
        if self.target.strict_fields and conf.STRICT_REQUEST_FIELDS:
            schema["additionalProperties"] = False
        return schema


class MessagesInputExtension(OpenApiSerializerExtension):
    """A message POST body: one message, or a list within the list field's limits."""

    target_class = MessagesInputSerializer

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        field: MessageListField = self.target.fields["messages"]
        one = auto_schema.resolve_serializer(MessageInputSerializer, direction).ref
        listed = {"type": "array", "items": one}
        # The list field's own validators, as drf-spectacular states them on a field.
        auto_schema._insert_field_validators(field, listed)
        return {"oneOf": [one, listed]}


class StopFieldExtension(OpenApiSerializerFieldExtension):
    """One stop sequence, or a list of them."""

    target_class = StopField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        text = {"type": "string", "minLength": 1}
        listed = {"type": "array", "items": text, "minItems": 1}
        return _described(self.target, {"oneOf": [text, listed]})


class ToolChoiceFieldExtension(OpenApiSerializerFieldExtension):
    """A mode, or one tool by name."""

    target_class = ToolChoiceField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        mode = {"type": "string", "enum": list(TOOL_CHOICE_MODES)}
        one = {
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1}},
            "required": ["name"],
            "additionalProperties": False,
        }
        return _described(self.target, {"oneOf": [mode, one]})


class ResponseFormatFieldExtension(OpenApiSerializerFieldExtension):
    """A JSON Schema: an object whose content JSON Schema itself describes."""

    target_class = ResponseFormatField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return _described(self.target, {"type": "object", "additionalProperties": {}})
