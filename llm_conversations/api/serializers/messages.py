"""Messages as requests send them: one message, a message POST body, a run's user turn.

These serializers check only the request's shape and size: ``MAX_MESSAGE_CHARS``
on text, ``MAX_MESSAGES_PER_REQUEST`` on a list, and that tool-call arguments
sent as JSON text decode to storable values. The message rules (roles, fields,
ids, which turn may carry what) are :class:`~llm_conversations.core.messages.ChatMessage`'s:
every value is handed on as sent, unknown keys included, for the store or the run
service to judge with the same codes as everywhere else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, cast

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import SkipField, empty
from rest_framework.settings import api_settings

from llm_conversations.api.serializers.common import NamesSentFields, SizeLimit
from llm_conversations.core.messages import Role
from llm_conversations.core.text import json_problem
from llm_conversations.core.tool_calls import CONTROL_CHARACTERS
from llm_conversations.models import MAX_ID_CHARS

__all__ = [
    "ROLE_CHOICES",
    "MessageContentField",
    "MessageInputSerializer",
    "MessageTextField",
    "MessagesInputSerializer",
    "ToolOutputField",
    "UserMessageField",
    "content_chars",
]

ROLE_CHOICES = [role.value for role in Role]

TOO_LARGE = "message content may have at most %(limit_value)d characters."
NOT_MESSAGES = "Send a message object or a non-empty list of them."


def content_chars(content: Any) -> int:
    """The characters of a message's text: a string, or the text parts of a list."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(
            len(part["text"])
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return 0


def text_chars(value: Any) -> int:
    """The characters of a value that is text; other JSON values have none."""
    return len(value) if isinstance(value, str) else 0


def message_chars(measure: Callable[[Any], int] = content_chars) -> SizeLimit:
    """``MAX_MESSAGE_CHARS`` on the text of a message (``too_large``)."""
    return SizeLimit("MAX_MESSAGE_CHARS", code="too_large", message=TOO_LARGE, measure=measure)


class MessageTextField(serializers.CharField):
    """Text that becomes a message: at most ``MAX_MESSAGE_CHARS`` characters, kept as sent."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, **kwargs)
        self.validators.append(message_chars())


class ToolOutputField(serializers.JSONField):
    """A tool's output: any JSON value; text within ``MAX_MESSAGE_CHARS``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators.append(message_chars(text_chars))


# Values handed on as sent ------------------------------------------------------


class AsSentField(serializers.Field[Any, Any, Any, Any]):
    """A value passed on as sent, after its validators (if any): the message rules judge it.

    ``required`` states the rule for the schema; an absent value stays absent,
    for the rules to refuse with their own code.
    """

    def run_validation(self, data: Any = empty) -> Any:
        if data is empty:
            raise SkipField()
        self.run_validators(data)
        return data

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field({"type": "string", "enum": ROLE_CHOICES})
class RoleField(AsSentField):
    """A message's role."""


@extend_schema_field({"type": "string", "maxLength": MAX_ID_CHARS})
class CallIdField(AsSentField):
    """A tool call's id (the rules refuse a longer one: ``invalid_tool_call_id``)."""


@extend_schema_field({"type": "string", "enum": ["function"]})
class CallTypeField(AsSentField):
    """A tool call's type."""


def no_control_characters(value: Any) -> None:
    """A tool call's name holds no control character (``invalid_tool_name``)."""
    if isinstance(value, str) and CONTROL_CHARACTERS.search(value):
        raise serializers.ValidationError(
            "A tool name must not contain control characters.", code="invalid_tool_name"
        )


@extend_schema_field({"type": "string", "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"})
class ToolNameField(AsSentField):
    """The name of the tool a call names: no control characters (the rest is the message
    rules')."""

    default_validators = [no_control_characters]


@extend_schema_field({"type": "boolean"})
class IsErrorField(AsSentField):
    """A tool result that reports a failure."""


def check_arguments_text(value: Any) -> None:
    """Arguments sent as JSON text are checked as the object they decode to.

    A client's ``"{\\"x\\": \\"\\\\u0000\\"}"`` holds a NUL once decoded: refused
    like any other NUL in a request (``invalid_text``, the storable-text policy
    of :func:`~llm_conversations.core.text.json_problem`). A model's such
    arguments are kept raw, as a malformed call, instead.
    """
    if not isinstance(value, str):
        return  # an object: the parser checked it with the rest of the body
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):
        return  # not JSON: stored as a malformed call, answered with an error
    problem = json_problem(decoded)
    if problem is None:
        return
    error = serializers.ErrorDetail(f"{problem.why} is not allowed.", code=problem.code)
    # The place inside the decoded value, below the field: "arguments.x".
    raise serializers.ValidationError({problem.path: [error]} if problem.path else [error])


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "description": "JSON text of the arguments object."},
            {"type": "object", "additionalProperties": True},
        ]
    }
)
class ArgumentsField(AsSentField):
    """A call's arguments: JSON text or an object."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(validators=[check_arguments_text], **kwargs)


class MessageContentField(AsSentField):
    """A message's content: text, or a list of content parts, or ``null`` beside calls;
    its text (the text parts of a list) within ``MAX_MESSAGE_CHARS``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(validators=[message_chars()], **kwargs)


class AsSentList(serializers.ListField):
    """A list whose items are checked by ``child`` and handed on as sent; a value that is
    not a list is handed on too, for the message rules to name."""

    def run_validation(self, data: Any = empty) -> Any:
        if data is empty:
            raise SkipField()
        if isinstance(data, list):
            # The list's own limits first: one too long is refused whatever its items hold.
            self.run_validators(data)
            self.check_items(data)
        return data

    def check_items(self, data: list[Any]) -> None:
        """Check each item with ``child``; errors name the item by index."""
        errors: dict[int, Any] = {}
        for index, item in enumerate(data):
            try:
                self.child.run_validation(item)
            except serializers.ValidationError as exc:
                errors[index] = exc.detail
        if errors:
            # Keyed by index, as DRF's own lists report items (the handler names them [i]).
            raise serializers.ValidationError(cast(Any, errors))


class AsSentSerializer(serializers.Serializer[Any]):
    """An object of the message form: its fields check what they check, and the object is
    handed on as sent, unknown keys included; a value that is not an object too."""

    def run_validation(self, data: Any = empty) -> Any:
        if data is empty:
            raise SkipField()
        if isinstance(data, Mapping):
            self.to_internal_value(data)
        return data


# Messages --------------------------------------------------------------------------


class FunctionInputSerializer(AsSentSerializer):
    """The function a call names."""

    name = ToolNameField()
    arguments = ArgumentsField(required=False)


class ToolCallInputSerializer(AsSentSerializer):
    """A tool call in the OpenAI form."""

    id = CallIdField()
    type = CallTypeField(required=False)
    function = FunctionInputSerializer()


class MessageInputSerializer(AsSentSerializer):
    """A message in the OpenAI form; arguments as JSON text or an object."""

    role = RoleField()
    content = MessageContentField(required=False, allow_null=True)
    tool_calls = AsSentList(child=ToolCallInputSerializer(), required=False)
    tool_call_id = CallIdField(required=False)
    is_error = IsErrorField(required=False)


class MessageListField(AsSentList):
    """The messages of one request: at most ``MAX_MESSAGES_PER_REQUEST``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            child=MessageInputSerializer(),
            min_length=1,
            error_messages={"min_length": NOT_MESSAGES},
            **kwargs,
        )
        self.validators.append(
            SizeLimit(
                "MAX_MESSAGES_PER_REQUEST",
                code="too_many_messages",
                message="at most %(limit_value)d messages per request; got %(show_value)d.",
            )
        )


def _body_error(detail: Any) -> serializers.ValidationError:
    """An error of the body as a whole: it names no field."""
    return serializers.ValidationError({api_settings.NON_FIELD_ERRORS_KEY: detail})


class MessagesInputSerializer(NamesSentFields, serializers.Serializer[Any]):
    """A message POST body: one message object, or a list of 1 to ``MAX_MESSAGES_PER_REQUEST``.

    The validated value is the list of messages, as sent (a single object is
    the list of one, which the store names ``messages[0]``: its errors name the
    fields without that prefix, as the body sent them).
    """

    messages = MessageListField()

    def to_internal_value(self, data: Any) -> list[Any]:
        field = cast(MessageListField, self.fields["messages"])
        if isinstance(data, Mapping):
            # The body is the message: its errors name its own fields.
            return [field.child.run_validation(data)]
        if not isinstance(data, list):
            raise _body_error([serializers.ErrorDetail(NOT_MESSAGES, code="invalid")])
        try:
            # The list's limits are the body's: they name no field.
            field.run_validators(data)
        except serializers.ValidationError as exc:
            raise _body_error(exc.detail) from None
        try:
            field.check_items(data)
        except serializers.ValidationError as exc:
            raise serializers.ValidationError({"messages": exc.detail}) from None
        return data

    def sent_names(self) -> dict[str, str]:
        # A single object is the body itself: "content", not "messages[0].content".
        return {"messages[0]": ""} if isinstance(self.initial_data, Mapping) else {}


class UserMessageField(serializers.Field[Any, Any, Any, Any]):
    """A run's user turn: its text (:class:`MessageTextField`) or a message object
    (:class:`MessageInputSerializer`), passed on for the run service to validate."""

    default_error_messages = {"invalid": "message must be a string or an object."}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.text = MessageTextField(allow_blank=True)
        self.message = MessageInputSerializer()

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str):
            return self.text.run_validation(data)
        if isinstance(data, Mapping):
            return self.message.run_validation(data)
        self.fail("invalid")

    def to_representation(self, value: Any) -> Any:
        return value

    @staticmethod
    def sent_names(value: Any) -> dict[str, str]:
        """Sent as text, the turn's content is the field itself: ``message``."""
        return {"message.content": "message"} if isinstance(value, str) else {}
