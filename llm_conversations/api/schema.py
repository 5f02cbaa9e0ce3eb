"""OpenAPI descriptions that serializers cannot express on their own.

Every limit the server enforces is stated, read from the settings when the
schema is generated: ``MAX_MESSAGE_CHARS`` (``maxLength`` of content, of a
run's message text and instructions, and of a tool's text output), ``MAX_MESSAGES_PER_REQUEST``
(``maxItems``), ``MAX_METADATA_KEYS`` (``maxProperties``) and
``MAX_ITERATIONS_LIMIT`` (``maximum``).

An event stream is described one event at a time: ``event`` names it and
``data`` is JSON text whose decoded form is a ``StreamEvent`` object
(``contentMediaType`` / ``contentSchema``, which schema-driven tools check).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import build_basic_type
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.types import OpenApiTypes
from rest_framework import serializers

from llm_conversations.api.ai_sdk import AI_SDK_FORMAT, PROTOCOL_HEADER, PROTOCOL_VERSION
from llm_conversations.api.inputs import message_input_schema, messages_input_schema
from llm_conversations.api.serializers import (
    MaxIterationsField,
    MessagesInputSerializer,
    MetadataField,
    StreamEventSerializer,
    ToolOutputField,
    UserMessageField,
)
from llm_conversations.api.serializers.parameters import (
    InstructionsField,
    ResponseFormatField,
    StopField,
    ToolChoiceField,
)
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


class MetadataFieldExtension(OpenApiSerializerFieldExtension):
    """Metadata: an object of any JSON values, at most ``MAX_METADATA_KEYS`` keys."""

    target_class = MetadataField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return _described(
            self.target,
            {
                "type": "object",
                "additionalProperties": {},
                "maxProperties": conf.MAX_METADATA_KEYS,
            },
        )


class MaxIterationsFieldExtension(OpenApiSerializerFieldExtension):
    """``max_iterations``: 1 to ``MAX_ITERATIONS_LIMIT``."""

    target_class = MaxIterationsField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = build_basic_type(OpenApiTypes.INT) or {"type": "integer"}
        return _described(
            self.target, {**schema, "minimum": 1, "maximum": conf.MAX_ITERATIONS_LIMIT}
        )


class ToolOutputFieldExtension(OpenApiSerializerFieldExtension):
    """Any JSON value; ``maxLength`` constrains only a text output, as the server does."""

    target_class = ToolOutputField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        text = {"type": "string", "maxLength": conf.MAX_MESSAGE_CHARS}
        others = [{"type": name} for name in ("object", "array", "number", "boolean")]
        return _described(self.target, {"anyOf": [text, *others]})


class UserMessageFieldExtension(OpenApiSerializerFieldExtension):
    """A run's user turn: its text or a message object, within ``MAX_MESSAGE_CHARS``."""

    target_class = UserMessageField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        text = {
            "type": "string",
            "description": "The text of a user message.",
            "maxLength": conf.MAX_MESSAGE_CHARS,
        }
        return _described(self.target, {"oneOf": [text, message_input_schema()]})


class MessagesInputExtension(OpenApiSerializerExtension):
    """A message POST body: one message or a list of 1 to ``MAX_MESSAGES_PER_REQUEST``."""

    target_class = MessagesInputSerializer

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return messages_input_schema()


class InstructionsFieldExtension(OpenApiSerializerFieldExtension):
    """A run's instructions: text within ``MAX_MESSAGE_CHARS``."""

    target_class = InstructionsField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = {"type": "string", "minLength": 1, "maxLength": conf.MAX_MESSAGE_CHARS}
        return _described(self.target, schema)


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
