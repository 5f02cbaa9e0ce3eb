"""Strict input types, size limits, shared fields, and the error body.

A limit of the HTTP surface (``MAX_MESSAGE_CHARS``, ``MAX_MESSAGES_PER_REQUEST``,
``MAX_METADATA_KEYS``) is declared once, as a :class:`SizeLimit` on the field it
bounds, which reads its setting whenever it is applied. drf-spectacular states
every such validator in the schema (``maxLength``, ``maxItems`` or
``maxProperties``, by the field's type), reading the same setting then, so
validation and the schema cannot disagree.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, ClassVar, TypeVar

from django.core.validators import MaxLengthValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from llm_conversations.conf import conf

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
    """Input in the declared JSON types only: ``0`` is not a string, ``"true"`` not a boolean.

    A key no field declares is refused too (``unknown_field``, naming it), unless
    ``STRICT_REQUEST_FIELDS`` is off or the serializer sets ``strict_fields``
    to ``False`` (bodies whose shape a frontend toolkit owns).
    """

    strict_fields: ClassVar[bool] = True

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            if self.strict_fields and conf.STRICT_REQUEST_FIELDS:
                unknown = sorted(str(key) for key in data if key not in self.fields)
                if unknown:
                    raise serializers.ValidationError(
                        {
                            name: [
                                ErrorDetail("Not a field of this request.", code="unknown_field")
                            ]
                            for name in unknown
                        }
                    )
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


# Limits -----------------------------------------------------------------------


class SizeLimit(MaxLengthValidator):
    """At most the setting ``setting`` of a request value, measured by ``measure``; refused
    with ``code`` (a stable error code) and ``message`` (``%(limit_value)d`` and
    ``%(show_value)d`` are the limit and the value's size).

    The setting is read each time (``limit_value`` is a callable, as Django's
    validators and drf-spectacular allow), so a field built before the
    settings changed still applies and states the current limit.
    """

    def __init__(
        self,
        setting: str,
        *,
        code: str,
        message: str,
        measure: Callable[[Any], int] = len,
    ) -> None:
        super().__init__(partial(getattr, conf, setting), message)
        self.setting = setting
        self.code = code
        self.measure = measure

    def clean(self, x: Any) -> int:
        return self.measure(x)

    def limit(self) -> int:
        """The limit the settings give now."""
        value: int = getattr(conf, self.setting)
        return value


def declared_limit(field: serializers.Field[Any, Any, Any, Any]) -> int | None:
    """The :class:`SizeLimit` a field declares, for schema extensions that state it themselves
    (fields of more than one JSON type, where drf-spectacular cannot place it)."""
    limits = [v.limit() for v in field.validators if isinstance(v, SizeLimit)]
    return min(limits) if limits else None


# Any JSON value, null included (the child's allow_null would make the schema an
# ambiguous oneOf); maxProperties comes from the field's SizeLimit.
@extend_schema_field({"type": "object", "additionalProperties": {}})
class MetadataField(serializers.DictField):
    """A JSON object of any values (``null`` included), at most ``MAX_METADATA_KEYS`` keys."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.JSONField(allow_null=True), **kwargs)
        self.validators.append(
            SizeLimit(
                "MAX_METADATA_KEYS",
                code="too_many_metadata_keys",
                message="metadata may have at most %(limit_value)d keys; got %(show_value)d.",
            )
        )


class MaxIterationsField(serializers.IntegerField):
    """``max_iterations``: 1 to ``MAX_ITERATIONS_LIMIT``.

    The range is the run service's rule (``invalid_max_iterations``, for every
    caller); the field states it for the schema (``minimum``, ``maximum``, read
    when the field is built: each serializer instance builds its own) and
    leaves the check to the service.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Set after DRF's own validators are built, so none is added for them.
        self.min_value, self.max_value = 1, conf.MAX_ITERATIONS_LIMIT


_QUERY_INTEGER = re.compile(r"-?[0-9]+\Z")


class QueryIntegerField(serializers.IntegerField):
    """An integer query parameter written as digits (with a sign for a negative one,
    which the field's bounds then refuse): DRF reads ``1.0``, ``+1`` and `` 1`` as 1,
    which the schema's ``integer`` does not allow."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str) and not _QUERY_INTEGER.match(data):
            self.fail("invalid")
        return int(super().to_internal_value(data))


def background_default() -> bool:
    """What ``background`` is when a request omits it: ``BACKGROUND_RUNS``."""
    return conf.BACKGROUND_RUNS


class BackgroundField(serializers.BooleanField):
    """Whether the run a request starts goes to a task worker; ``BACKGROUND_RUNS`` when
    omitted (read when the request is validated)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, default=background_default, **kwargs)


class NamesSentFields:
    """A request body that tells how the services it is handed to name its values.

    The exception handler names an error's field as the request sent it
    (:func:`~llm_conversations.api.errors.sent_field`) from :meth:`sent_names`.
    """

    def sent_names(self) -> dict[str, str]:
        """Field names the services give (``messages[0]``, ``message.content``) mapped to the
        request's own for that value (``""`` for the body itself)."""
        return {}


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
