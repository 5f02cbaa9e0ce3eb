"""Tools as offered to a model: a name, a description and a JSON Schema.

This module imports nothing from Django and nothing from httpx.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_conversations.exceptions import InvalidMessage

__all__ = ["ToolSpec"]

# \Z, not $: "$" also matches before a final newline, which no provider accepts.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")


def _empty_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: a name, a description and a JSON Schema.

    The name follows the strictest provider rule (``[A-Za-z0-9_-]{1,64}``) so
    one spec works everywhere; ``parameters`` is a JSON Schema object.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=_empty_schema)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _TOOL_NAME.match(self.name):
            raise InvalidMessage(
                "invalid_tool_name",
                f"tool name must match [A-Za-z0-9_-]{{1,64}}; got {self.name!r}.",
                field="name",
            )
        if not isinstance(self.parameters, dict) or self.parameters.get("type") != "object":
            raise InvalidMessage(
                "invalid_tool_schema",
                'tool parameters must be a JSON Schema with "type": "object".',
                field="parameters",
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolSpec:
        """Read either form: :meth:`to_wire` (an OpenAI ``tools`` entry) or :meth:`to_stored`.

        A missing or empty description is ``""``; missing parameters take no
        arguments. Other keys (such as OpenAI's ``strict``) are ignored, as a
        ``tools=`` list written for OpenAI may carry them.
        """
        if not isinstance(data, Mapping):
            raise InvalidMessage("invalid_tool", "a tool must be an object.")
        if "function" not in data:
            return cls._from_fields(data)
        if data.get("type", "function") != "function":
            raise InvalidMessage(
                "invalid_tool", f'tool type must be "function"; got {data["type"]!r}.', field="type"
            )
        function = data["function"]
        if not isinstance(function, Mapping):
            raise InvalidMessage(
                "invalid_tool", 'a tool needs a "function" object.', field="function"
            )
        try:
            return cls._from_fields(function)
        except InvalidMessage as exc:
            raise exc.within("function") from None

    @classmethod
    def _from_fields(cls, data: Mapping[str, Any]) -> ToolSpec:
        description = data.get("description") or ""
        if not isinstance(description, str):
            raise InvalidMessage(
                "invalid_tool_description",
                "tool description must be a string.",
                field="description",
            )
        parameters = data.get("parameters") or _empty_schema()
        if not isinstance(parameters, Mapping):
            raise InvalidMessage(
                "invalid_tool_schema",
                'tool parameters must be a JSON Schema with "type": "object".',
                field="parameters",
            )
        name: Any = data.get("name")  # checked by __post_init__
        return cls(name=name, description=description, parameters=dict(parameters))

    def to_wire(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry: ``{"type": "function", "function": {...}}``.

        ``parameters`` always carries ``properties`` (empty when the schema has none).
        """
        parameters = dict(self.parameters)
        parameters.setdefault("properties", {})
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def to_stored(self) -> dict[str, Any]:
        """The decoded form: exactly ``{"name", "description", "parameters"}``."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }
