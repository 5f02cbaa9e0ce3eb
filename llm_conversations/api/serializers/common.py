"""Strict input types, shared fields, and the error body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

_T = TypeVar("_T")

# Strict input types ----------------------------------------------------------


def _type_problem(field: serializers.Field[Any, Any, Any, Any], value: Any) -> str | None:
    """Why ``value`` has the wrong JSON type for ``field``; DRF would coerce it."""
    if value is None:
        return None  # the field's own allow_null decides
    if isinstance(field, serializers.BooleanField):
        return None if isinstance(value, bool) else "Must be a boolean."
    if isinstance(field, serializers.IntegerField):
        # JSON Schema's integer: 2 or 2.0, not 2.5, "2" or true.
        integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        return None if integral and not isinstance(value, bool) else "Must be an integer."
    if isinstance(field, serializers.FloatField):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return None if number else "Must be a number."
    if isinstance(field, serializers.CharField):
        return None if isinstance(value, str) else "Must be a string."
    if isinstance(field, serializers.ListField):
        if not isinstance(value, list):
            return "Must be a list."
        for item in value:
            problem = _type_problem(field.child, item)
            if problem:
                return f"Each item: {problem[0].lower()}{problem[1:]}"
    return None


class StrictTypes(serializers.Serializer[_T]):
    """Input in the declared JSON types only: ``0`` is not a string, ``"true"`` not a boolean."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            errors = {
                name: [ErrorDetail(problem, code="invalid")]
                for name, field in self.fields.items()
                if not field.read_only
                and name in data
                and (problem := _type_problem(field, data[name]))
            }
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


class MetadataField(serializers.DictField):
    """A JSON object of any values (``null`` included), at most ``MAX_METADATA_KEYS`` keys."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.JSONField(allow_null=True), **kwargs)


class MaxIterationsField(serializers.IntegerField):
    """``max_iterations``: 1 to ``MAX_ITERATIONS_LIMIT`` (checked by the service)."""


class ToolOutputField(serializers.JSONField):
    """A tool's output: any JSON value; text within ``MAX_MESSAGE_CHARS``."""


class MessagesInputSerializer(serializers.Serializer[Any]):
    """A message POST body: one message object or a list of them (schema only)."""


# Errors ---------------------------------------------------------------------


class ErrorDetailSerializer(serializers.Serializer[Any]):
    """The body of an error."""

    code = serializers.CharField(help_text="Stable error code, e.g. `conversation_busy`.")
    message = serializers.CharField(help_text="What went wrong, for people.")
    field = serializers.CharField(
        allow_null=True, help_text="The offending request field, dotted (`message.content`)."
    )
    # Any JSON value, null included (declared without allow_null, which
    # Open API 3.1 output would turn into an ambiguous oneOf).
    details = serializers.JSONField(
        help_text="More about the error: validation messages by field, a run."
    )


class ErrorSerializer(serializers.Serializer[Any]):
    """Every error response: `{"error": {...}}`."""

    error = ErrorDetailSerializer()
