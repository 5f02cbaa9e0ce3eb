"""OpenAPI descriptions that serializers cannot express on their own.

An event stream is described one event at a time: ``event`` names it and
``data`` is JSON text whose decoded form is a ``StreamEvent`` object
(``contentMediaType`` / ``contentSchema``, which schema-driven tools check).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.settings import spectacular_settings
from rest_framework import serializers

from llm_conversations.api.serializers import StreamEventSerializer
from llm_conversations.api.sse import RunEventName

__all__ = ["ServerSentEventSerializer", "describe_run_events"]


def describe_run_events() -> str:
    """The events of a run's stream, in order, as Markdown for the schema's descriptions."""
    progress = ", ".join(f"`{name}`" for name in RunEventName if not name.ends_stream)
    ending = ", ".join(f"`{name}`" for name in RunEventName if name.ends_stream)
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

    event = serializers.ChoiceField(choices=[name.value for name in RunEventName])
    data = EventDataField()  # type: ignore[assignment]  # a field, not .data
