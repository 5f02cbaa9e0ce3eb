"""Tool calls the model requests: ``ToolCall`` and the rule for the calls of one turn.

This module imports nothing from Django and nothing from httpx.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_conversations.core.text import json_problem
from llm_conversations.exceptions import InvalidMessage

__all__ = ["CONTROL_CHARACTERS", "ToolCall", "check_tool_calls"]

CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""C0 and C1 controls and DEL: what no offered tool's name holds, so what the API
refuses in a call's name and a provider's reply has replaced. Not a rule of
``ToolCall`` itself: calls stored before it was a rule must stay readable."""


def _encode_arguments(arguments: Mapping[str, Any]) -> str:
    # Compact and non-ASCII preserving; an empty object is always "{}".
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call requested by the model.

    ``arguments`` is the decoded JSON object. When the model sent arguments
    that are not a JSON object (malformed JSON, a list, a number), ``arguments``
    is empty and ``raw_arguments`` keeps the text exactly as received, so the
    tool loop can answer the call with an error instead of running the tool
    with arguments the model never gave. Check :attr:`malformed`.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    type: str = "function"
    raw_arguments: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InvalidMessage(
                "invalid_tool_call_id", "tool call id must be a non-empty string.", field="id"
            )
        if not isinstance(self.name, str) or not self.name:
            raise InvalidMessage(
                "invalid_tool_name",
                "tool call function name must be a non-empty string.",
                field="function.name",
            )
        if self.type != "function":
            raise InvalidMessage(
                "invalid_tool_call_type",
                f'tool call type must be "function"; got {self.type!r}.',
                field="type",
            )
        if not isinstance(self.arguments, dict):
            raise InvalidMessage(
                "invalid_arguments",
                "tool call arguments must be a dict; use ToolCall.from_dict() for JSON text.",
                field="function.arguments",
            )
        if self.raw_arguments is not None and self.arguments:
            raise InvalidMessage(
                "invalid_arguments",
                "a tool call with raw_arguments has no decoded arguments.",
                field="function.arguments",
            )

    @property
    def malformed(self) -> bool:
        """True when the model's arguments were not a JSON object."""
        return self.raw_arguments is not None

    @property
    def arguments_json(self) -> str:
        """The arguments as JSON text: ``"{}"`` when empty, raw text when malformed."""
        if self.raw_arguments is not None:
            return self.raw_arguments
        return _encode_arguments(self.arguments)

    @classmethod
    def parse(cls, *, id: str, name: str, arguments: object, type: str = "function") -> ToolCall:
        """Build a call from arguments given as a JSON string, a dict, or ``None``.

        ``None`` and ``""`` mean no arguments. Anything that does not decode to a
        JSON object is kept raw and flagged (see :attr:`malformed`), and so is
        JSON text whose object no database can store (a NUL or a lone surrogate
        escaped in it, a number like ``1e400``): the text itself stays storable,
        so a call read back from the database is malformed again.
        """
        if arguments is None or arguments == "":
            return cls(id=id, name=name, type=type)
        if isinstance(arguments, dict):
            return cls(id=id, name=name, arguments=arguments, type=type)
        if isinstance(arguments, str):
            try:
                decoded = json.loads(arguments)
            except ValueError:
                decoded = None
            if isinstance(decoded, dict) and json_problem(decoded) is None:
                return cls(id=id, name=name, arguments=decoded, type=type)
            return cls(id=id, name=name, type=type, raw_arguments=arguments)
        # A list or number sent as a decoded value: keep its JSON text.
        try:
            raw = json.dumps(arguments, ensure_ascii=False)
        except (TypeError, ValueError):
            raise InvalidMessage(
                "invalid_arguments",
                "tool call arguments must be a JSON object or JSON text.",
                field="function.arguments",
            ) from None
        return cls(id=id, name=name, type=type, raw_arguments=raw)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """Read either form, :meth:`to_wire` or :meth:`to_stored`.

        Both are ``{"id", "type", "function": {"name", "arguments"}}``;
        ``arguments`` may be JSON text or a decoded object.
        """
        if not isinstance(data, Mapping):
            raise InvalidMessage("invalid_tool_call", "a tool call must be an object.")
        function = data.get("function")
        if not isinstance(function, Mapping):
            raise InvalidMessage(
                "invalid_tool_call",
                'a tool call needs a "function" object with "name" and "arguments".',
                field="function",
            )
        unknown = set(data) - {"id", "type", "function"}
        unknown |= {f"function.{k}" for k in set(function) - {"name", "arguments"}}
        if unknown:
            raise InvalidMessage(
                "unknown_field",
                f"unknown tool call field(s): {', '.join(sorted(unknown))}.",
                field=sorted(unknown)[0],
            )
        return cls.parse(
            id=data.get("id"),  # type: ignore[arg-type]
            name=function.get("name"),  # type: ignore[arg-type]
            arguments=function.get("arguments"),
            type=data.get("type", "function"),
        )

    def to_wire(self) -> dict[str, Any]:
        """The OpenAI request form: arguments as JSON text."""
        return {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": self.arguments_json},
        }

    def to_stored(self) -> dict[str, Any]:
        """The form kept in the database: decoded arguments (raw text when malformed)."""
        arguments: dict[str, Any] | str = (
            self.raw_arguments if self.raw_arguments is not None else dict(self.arguments)
        )
        return {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": arguments},
        }


def check_tool_calls(tool_calls: Sequence[ToolCall]) -> None:
    """Check the calls of one turn: each a :class:`ToolCall`, no id twice."""
    seen: set[str] = set()
    for index, call in enumerate(tool_calls):
        if not isinstance(call, ToolCall):
            raise InvalidMessage(
                "invalid_tool_call",
                f"tool_calls[{index}] must be a ToolCall.",
                field=f"tool_calls[{index}]",
            )
        if call.id in seen:
            raise InvalidMessage(
                "duplicate_tool_call_id",
                f"tool call id {call.id!r} appears more than once in one assistant turn.",
                field=f"tool_calls[{index}].id",
            )
        seen.add(call.id)
