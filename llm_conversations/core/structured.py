"""Structured output: the JSON Schema a run's final answer must match, and judging an answer.

A :class:`ResponseFormat` holds a JSON Schema whose root is an object (every
provider's native mechanism takes one; OpenAI and Anthropic require it). The
final answer of a run is read as JSON and validated with ``jsonschema``:
:meth:`ResponseFormat.judge` gives the parsed value or what is wrong with it,
in words meant for the model, which gets them in a repair round.

Schemas come from clients, so validating with one must not reach out or run
away: :mod:`llm_conversations.core.json_schemas` builds the validator and
bounds its work (:data:`VALIDATION_SECONDS`); its names are re-exported here.

This module imports nothing from Django and nothing from httpx.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
import jsonschema.exceptions

from llm_conversations.core.json_schemas import (
    VALIDATION_SECONDS,
    SchemaTimeout,
    errors_within,
    json_schema_validator,
    map_subschemas,
    reference_problem,
)
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.text import json_problem
from llm_conversations.exceptions import ParameterError

__all__ = [
    "REPAIR_PROMPT",
    "VALIDATION_SECONDS",
    "Judgment",
    "ResponseFormat",
    "SchemaTimeout",
    "describes_object",
    "errors_within",
    "json_schema_validator",
    "map_subschemas",
    "reference_problem",
    "repairs_so_far",
]

# OpenAI's rule for a schema name; a title that breaks it is not used as the name.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
DEFAULT_NAME = "response"
# Problems quoted to the model and stored on the run are cut to this length.
PROBLEM_LIMIT = 500
REPAIR_PROMPT = (
    "Your previous answer does not match the required JSON Schema: {problem} "
    "Answer again with only the JSON value, matching the schema exactly."
)
# A fenced block around the whole answer: ```json ... ``` (some models add one).
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n(.*)\n```$", re.DOTALL)


def describes_object(schema: Mapping[str, Any]) -> bool:
    """Whether a (sub)schema describes an object: its type, or properties."""
    kind = schema.get("type")
    return (
        kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in schema
    )


@dataclass(frozen=True, slots=True)
class Judgment:
    """How an answer fares against a schema: its parsed ``value``, or the ``problem``."""

    value: Any = None
    problem: str | None = None
    # The answer could not be checked in time: another answer will fare no better.
    timed_out: bool = False

    @property
    def valid(self) -> bool:
        """Whether the answer matched."""
        return self.problem is None

    def repair_prompt(self) -> str:
        """The user turn of a repair round: what was wrong, and what to do."""
        return REPAIR_PROMPT.format(problem=self.problem)


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """A JSON Schema for a run's final answer; its root describes an object."""

    schema: dict[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.schema, dict) or not describes_object(self.schema):
            raise ParameterError(
                "invalid_response_format",
                'response_format must be a JSON Schema of an object ("type": "object").',
                field="response_format",
            )
        problem = json_problem(self.schema, "response_format")
        if problem is not None:
            raise ParameterError(
                "invalid_response_format",
                f"{problem.why} cannot be stored.",
                field=problem.path,
            )
        reference = reference_problem(self.schema)
        if reference is not None:
            raise ParameterError(
                "remote_schema_reference",
                f"response_format may reference only its own definitions (#...); "
                f"{reference} is not one.",
                field="response_format",
            )
        try:
            json_schema_validator(self.schema)
        except jsonschema.SchemaError as exc:
            raise ParameterError(
                "invalid_response_format",
                f"response_format is not valid JSON Schema: {exc.message}",
                field="response_format",
            ) from None

    @classmethod
    def from_input(cls, value: Any) -> ResponseFormat:
        """A ``ResponseFormat``, a JSON Schema dict, or a pydantic model class.

        A pydantic model is read through its ``model_json_schema()``; pydantic
        itself is not imported here.
        """
        if isinstance(value, ResponseFormat):
            return value
        schema_of = getattr(value, "model_json_schema", None)
        if isinstance(value, type) and callable(schema_of):
            return cls(schema_of())
        if isinstance(value, Mapping):
            return cls(dict(value))
        raise ParameterError(
            "invalid_response_format",
            "response_format must be a JSON Schema (an object) or a pydantic model class.",
            field="response_format",
        )

    def to_stored(self) -> dict[str, Any]:
        """The schema itself, as given: the form a run keeps and the API shows."""
        return dict(self.schema)

    @property
    def name(self) -> str:
        """The schema's ``title`` when it makes a valid name (pydantic sets the class name)."""
        title = self.schema.get("title")
        return title if isinstance(title, str) and _NAME.match(title) else DEFAULT_NAME

    @property
    def strict(self) -> bool:
        """Whether the schema fits OpenAI's strict mode: every object closes
        ``additionalProperties`` and requires every property."""
        fits = True

        def check(schema: dict[str, Any]) -> dict[str, Any]:
            nonlocal fits
            if describes_object(schema):
                properties = schema.get("properties") or {}
                fits = fits and (
                    schema.get("additionalProperties") is False
                    and sorted(schema.get("required") or []) == sorted(properties)
                )
            return schema

        map_subschemas(self.schema, check)
        return fits

    def judge(self, text: str) -> Judgment:
        """Read ``text`` as JSON (one surrounding code fence allowed) and validate it."""
        stripped = text.strip()
        fenced = _FENCE.match(stripped)
        if fenced:
            stripped = fenced.group(1).strip()
        try:
            value = json.loads(stripped, parse_constant=_refuse_constant)
        except ValueError as exc:
            return Judgment(problem=_cut(f"the answer is not valid JSON ({exc})."))
        problem = json_problem(value)
        if problem is not None:
            return Judgment(problem=_cut(f"{problem.why} cannot be stored."))
        validator = json_schema_validator(self.schema)
        try:
            error = jsonschema.exceptions.best_match(errors_within(validator, value))
        except SchemaTimeout:
            return Judgment(
                problem=f"the answer could not be checked within {VALIDATION_SECONDS:g} s.",
                timed_out=True,
            )
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path)
            at = f"at /{where}" if where else "at the top level"
            return Judgment(problem=_cut(f"{at}: {error.message}."))
        return Judgment(value=value)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _cut(text: str) -> str:
    return text if len(text) <= PROBLEM_LIMIT else text[: PROBLEM_LIMIT - 1] + "…"


def repairs_so_far(history: Sequence[ChatMessage], iterations: int) -> int:
    """How many repair rounds the run whose ``iterations`` model calls end ``history`` asked for.

    A run stores one user turn first; after it, only repair prompts are user
    turns. Walking back over the run's ``iterations`` assistant turns, the
    user turns met before the run's first one are its repair prompts.
    """
    assistants = repairs = 0
    for message in reversed(history):
        if message.role is Role.ASSISTANT:
            assistants += 1
        elif message.role is Role.USER:
            if assistants >= iterations:
                break
            repairs += 1
    return repairs
