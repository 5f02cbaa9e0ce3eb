"""JSON Schema generation from signatures (pydantic) and validators for explicit schemas."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from typing import Annotated, Any

import jsonschema
import pydantic

from llm_conversations.core.structured import json_schema_validator, map_subschemas
from llm_conversations.exceptions import ToolError


def strip_titles(node: Any) -> Any:
    """Drop pydantic's generated ``title`` keywords; they only add tokens."""
    return map_subschemas(node, lambda schema: {k: v for k, v in schema.items() if k != "title"})


def description_from_doc(function: Callable[..., Any]) -> str:
    """The first paragraph of the docstring on one line."""
    doc = inspect.getdoc(function) or ""
    first = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    return " ".join(first.split())


def _with_descriptions(annotation: Any) -> Any:
    """Turn ``Annotated[T, "text"]`` into ``Annotated[T, Field(description="text")]``."""
    if typing.get_origin(annotation) is not Annotated:
        return annotation
    base, *metadata = typing.get_args(annotation)
    metadata = [
        pydantic.Field(description=item) if isinstance(item, str) else item for item in metadata
    ]
    return Annotated[(base, *metadata)]


def arguments_model(
    name: str, function: Callable[..., Any], *, exclude: str | None = None
) -> type[pydantic.BaseModel]:
    """A pydantic model of the function's keyword arguments but ``exclude`` (the
    parameter the loop fills, never the model).

    Fields get neutral names (``p0``, ``p1``...) with the parameter name as alias,
    so parameters such as ``schema``, ``copy`` or ``_id`` never clash with
    ``BaseModel`` attributes or pydantic's private-attribute rule.
    """
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as exc:
        raise ToolError("invalid_tool", f"cannot resolve type hints of {name}: {exc}") from exc
    fields: dict[str, Any] = {}
    for index, parameter in enumerate(inspect.signature(function).parameters.values()):
        if parameter.name == exclude:
            continue
        if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            raise ToolError(
                "invalid_tool",
                f"{name}: parameter {parameter.name!r} must be passable by keyword "
                "(no *args, **kwargs or positional-only parameters); pass schema= to "
                "declare such a function.",
            )
        annotation = _with_descriptions(hints.get(parameter.name, Any))
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[f"p{index}"] = (annotation, pydantic.Field(default, alias=parameter.name))
    try:
        return pydantic.create_model(name, __config__=pydantic.ConfigDict(extra="forbid"), **fields)
    except pydantic.PydanticUserError as exc:
        first_line = str(exc).splitlines()[0]
        raise ToolError("invalid_tool", f"cannot build a schema for {name}: {first_line}") from exc


def provider_schema(model: type[pydantic.BaseModel], name: str) -> dict[str, Any]:
    """The model's JSON Schema in the shape every provider accepts."""
    try:
        schema = strip_titles(model.model_json_schema())
    except pydantic.PydanticUserError as exc:
        first_line = str(exc).splitlines()[0]
        raise ToolError("invalid_tool", f"cannot build a schema for {name}: {first_line}") from exc
    result: dict[str, Any] = {
        "type": "object",
        "properties": schema.get("properties", {}),
        "required": schema.get("required", []),
    }
    result.update({k: v for k, v in schema.items() if k not in result})
    return result


def schema_validator(name: str, schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A validator for an explicit schema; :class:`ToolError` when the schema is invalid."""
    try:
        return json_schema_validator(schema)
    except jsonschema.SchemaError as exc:
        raise ToolError(
            "invalid_tool_schema", f"the schema of {name} is not valid JSON Schema: {exc.message}"
        ) from exc


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending in an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
