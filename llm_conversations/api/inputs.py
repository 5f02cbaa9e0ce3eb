"""The shape of message input and the API's own limits on it.

Only the request's shape and size are checked here (one object or a list,
``MAX_MESSAGES_PER_REQUEST``, ``MAX_MESSAGE_CHARS``); the messages themselves
are validated by the service that stores them, with the same rules as
everywhere else.
"""

from __future__ import annotations

import json
from typing import Any

from llm_conversations.api.errors import ApiError
from llm_conversations.conf import conf
from llm_conversations.core.messages import Role
from llm_conversations.core.text import json_problem
from llm_conversations.exceptions import join_field
from llm_conversations.models import MAX_ID_CHARS

__all__ = [
    "ROLE_CHOICES",
    "check_text",
    "message_input_schema",
    "message_items",
    "messages_input_schema",
    "rebase_field",
    "too_large",
]


ROLE_CHOICES = [role.value for role in Role]

# The request form of a message, as a plain schema: requests take one message
# or a list, which serializers cannot express. The message rules, not this
# schema, decide what is valid; the limits are the API's and the columns'.
# Built when the schema is generated, so the limits are the settings' own.
_ARGUMENTS_SCHEMA = {
    "oneOf": [
        {"type": "string", "description": "JSON text of the arguments object."},
        {"type": "object", "additionalProperties": True},
    ]
}


_CONTENT_PARTS_SCHEMA: dict[str, Any] = {
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


def message_input_schema() -> dict[str, Any]:
    """The request form of one message, with the limits the server enforces."""
    return {
        "type": "object",
        "description": "A message in the OpenAI form; arguments as JSON text or an object.",
        "properties": {
            "role": {"type": "string", "enum": ROLE_CHOICES},
            "content": {
                "oneOf": [
                    {"type": "string", "maxLength": conf.MAX_MESSAGE_CHARS},
                    _CONTENT_PARTS_SCHEMA,
                ],
                "nullable": True,
            },
            "tool_calls": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "maxLength": MAX_ID_CHARS},
                        "type": {"type": "string", "enum": ["function"]},
                        "function": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "arguments": _ARGUMENTS_SCHEMA,
                            },
                            "required": ["name"],
                        },
                    },
                    "required": ["id", "function"],
                },
            },
            "tool_call_id": {"type": "string", "maxLength": MAX_ID_CHARS},
            "is_error": {"type": "boolean"},
        },
        "required": ["role"],
    }


def messages_input_schema() -> dict[str, Any]:
    """A message POST body: one message or 1 to ``MAX_MESSAGES_PER_REQUEST`` of them."""
    one = message_input_schema()
    return {
        "oneOf": [
            one,
            {
                "type": "array",
                "items": one,
                "minItems": 1,
                "maxItems": conf.MAX_MESSAGES_PER_REQUEST,
            },
        ]
    }


def too_large(field: str) -> ApiError:
    """The error for content over ``MAX_MESSAGE_CHARS``."""
    limit = conf.MAX_MESSAGE_CHARS
    return ApiError(
        400, "too_large", f"message content may have at most {limit} characters.", field=field
    )


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


def message_items(data: Any) -> list[Any]:
    """The messages of a message POST body: one message object or a list of them.

    Checks only the shape of the body and the API's size limits; the items are
    returned as sent, for the store to validate. Errors name the field as in
    the request: ``content`` for a single object, ``messages[2].content`` for
    a list (its index in the list).
    """
    single = isinstance(data, dict)
    items = [data] if single else data
    if not isinstance(items, list) or not items:
        raise ApiError(400, "invalid", "Send a message object or a non-empty list of them.")
    limit = conf.MAX_MESSAGES_PER_REQUEST
    if len(items) > limit:
        raise ApiError(
            400,
            "too_many_messages",
            f"at most {limit} messages per request; got {len(items)}.",
            details={"limit": limit},
        )
    prefix = "" if single else "messages[{}]"
    for index, item in enumerate(items):
        content = item.get("content") if isinstance(item, dict) else None
        if content_chars(content) > conf.MAX_MESSAGE_CHARS:
            raise too_large(join_field(prefix.format(index), "content") or "content")
        _check_argument_text(item, prefix.format(index))
    return items


def _check_argument_text(item: Any, prefix: str) -> None:
    """Arguments sent as JSON text are checked as the object they decode to.

    A client's ``"{\"x\": \"\\u0000\"}"`` holds a NUL once decoded: refused
    like any other NUL in a request. (A model's such arguments are kept raw,
    as a malformed call, instead.)
    """
    calls = item.get("tool_calls") if isinstance(item, dict) else None
    for i, call in enumerate(calls if isinstance(calls, list) else ()):
        function = call.get("function") if isinstance(call, dict) else None
        text = function.get("arguments") if isinstance(function, dict) else None
        if not isinstance(text, str):
            continue
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):
            continue  # not JSON: stored as a malformed call, answered with an error
        check_text(decoded, join_field(prefix, f"tool_calls[{i}].function.arguments") or "")


def check_text(value: Any, path: str = "") -> None:
    """Refuse request data that no supported database stores, naming the field.

    Applies the one storable-text policy (:func:`llm_conversations.core.text.json_problem`):
    NUL characters and lone surrogates (``invalid_text``), numbers that are not
    finite (``invalid_number``, e.g. ``1e400``) and nesting deeper than
    ``MAX_JSON_DEPTH`` (``too_deep``), anywhere in ``value``, keys included.
    The same request is then a 400 on every database, never a server error.
    """
    problem = json_problem(value, path)
    if problem is not None:
        raise ApiError(
            400, problem.code, f"{problem.why} is not allowed.", field=problem.path or None
        )


def rebase_field(field: str | None, prefix: str) -> str | None:
    """Name a store error's ``messages[0]...`` field after the request's one message.

    ``prefix`` replaces ``messages[0]``: ``"message"`` for a run's message,
    ``""`` for a single message posted on its own.
    """
    if field is None or not field.startswith("messages[0]"):
        return field
    return join_field(prefix, field.removeprefix("messages[0]").lstrip(".") or None)
