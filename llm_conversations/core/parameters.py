"""Per-run parameters: what one run asks of its provider, and what a provider can honour.

:class:`RunParameters` holds the parameters of one run (instructions, model,
sampling, tool choice, structured output), validated once when they enter
(:meth:`RunParameters.from_input`). :class:`ParameterSupport` declares what a
provider adapter can honour; a parameter it cannot is refused before anything
is stored, never silently dropped. The adapters map each parameter to their
native request field (``docs/providers.md`` has the table).

This module imports nothing from Django and nothing from httpx.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypedDict

from llm_conversations.core.structured import ResponseFormat
from llm_conversations.core.text import text_problem
from llm_conversations.exceptions import ParameterError

__all__ = [
    "OUTPUT_TOKENS_RANGE",
    "PARAMETER_NAMES",
    "REASONING_EFFORTS",
    "SAMPLING",
    "TOOL_CHOICE_MODES",
    "ParameterSupport",
    "RunParameterInput",
    "RunParameters",
    "ToolChoice",
]

# Every value any provider takes; each adapter declares the ones it honours.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
TOOL_CHOICE_MODES = ("auto", "none", "required")
# The parameters an adapter maps to a native field one to one.
SAMPLING = ("temperature", "top_p", "max_output_tokens", "stop", "seed")
TEMPERATURE_RANGE = (0.0, 2.0)
TOP_P_RANGE = (0.0, 1.0)
SEED_RANGE = (-(2**63), 2**63 - 1)
# The largest output any provider takes is far below this; a signed 32-bit integer
# is what their APIs declare, so a larger number is a mistake, refused here.
OUTPUT_TOKENS_RANGE = (1, 2**31 - 1)
# The Run.model column.
MAX_MODEL_CHARS = 200


class RunParameterInput(TypedDict, total=False):
    """The keyword arguments of ``ToolLoopService.start`` that set run parameters."""

    instructions: str | None
    model: str | None
    temperature: float | None
    top_p: float | None
    max_output_tokens: int | None
    stop: str | Sequence[str] | None
    seed: int | None
    reasoning_effort: str | None
    tool_choice: str | Mapping[str, Any] | ToolChoice | None
    parallel_tool_calls: bool | None
    response_format: Mapping[str, Any] | type | ResponseFormat | None


PARAMETER_NAMES: tuple[str, ...] = tuple(RunParameterInput.__annotations__)


def _invalid(name: str, message: str) -> ParameterError:
    return ParameterError("invalid_parameter", f"{name} {message}", field=name)


def _number(name: str, value: Any, bounds: tuple[float, float]) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _invalid(name, "must be a number.")
    low, high = bounds
    if not low <= value <= high:
        raise _invalid(name, f"must be between {low:g} and {high:g}; got {value!r}.")
    return float(value)


def _integer(name: str, value: Any, low: int, high: int | None = None) -> int:
    # JSON Schema's integer: 2 and 2.0, never true or 2.5.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(name, "must be an integer.")
    if value < low or (high is not None and value > high):
        limit = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise _invalid(name, f"must be {limit}; got {value!r}.")
    return value


def _text(name: str, value: Any, limit: int | None = None) -> str:
    if not isinstance(value, str) or not value:
        raise _invalid(name, "must be a non-empty string.")
    problem = text_problem(value)
    if problem:
        raise ParameterError("invalid_text", f"{name} holds {problem}.", field=name)
    if limit is not None and len(value) > limit:
        raise _invalid(name, f"may have at most {limit} characters.")
    return value


def _stop(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items:
        raise _invalid("stop", "must be a string or a non-empty list of strings.")
    return tuple(_text(f"stop[{i}]", item) for i, item in enumerate(items))


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """Which tools the model may or must call: ``auto``, ``none``, ``required``, or one ``tool``."""

    mode: str
    name: str | None = None

    @classmethod
    def from_input(cls, value: Any) -> ToolChoice:
        """``"auto"``, ``"none"``, ``"required"``, or ``{"name": "get_weather"}``."""
        if isinstance(value, ToolChoice):
            return value
        if isinstance(value, str) and value in TOOL_CHOICE_MODES:
            return cls(value)
        if isinstance(value, Mapping) and set(value) == {"name"}:
            return cls("tool", _text("tool_choice.name", value["name"]))
        raise _invalid(
            "tool_choice", 'must be "auto", "none", "required" or {"name": "<an offered tool>"}.'
        )

    @property
    def forcing(self) -> bool:
        """Whether it makes the model call a tool."""
        return self.mode in ("required", "tool")

    def to_stored(self) -> str | dict[str, str]:
        """The mode, or ``{"name": ...}`` for one tool: the input form."""
        return {"name": self.name or ""} if self.mode == "tool" else self.mode


@dataclass(frozen=True, slots=True)
class RunParameters:
    """The parameters of one run; ``None`` leaves a parameter to the provider's default
    (the entry's ``OPTIONS``, then the provider's own)."""

    instructions: str | None = None
    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    reasoning_effort: str | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None

    @classmethod
    def from_input(cls, values: Mapping[str, Any] | RunParameters | None) -> RunParameters:
        """Validate parameters given by name (``None`` values are unset).

        Raises :class:`ParameterError` naming the parameter in ``field``.
        """
        if values is None:
            return cls()
        if isinstance(values, RunParameters):
            return values
        unknown = sorted(set(values) - set(PARAMETER_NAMES), key=str)
        if unknown:
            raise ParameterError(
                "unknown_parameter",
                f"unknown run parameter {unknown[0]!r}; known: {', '.join(PARAMETER_NAMES)}.",
                field=str(unknown[0]),
            )
        given = {name: value for name, value in values.items() if value is not None}
        read: dict[str, Any] = {}
        for name, value in given.items():
            read[name] = _READERS[name](value)
        return cls(**read)

    def to_stored(self) -> dict[str, Any]:
        """The parameters that are set, in their input form (JSON)."""
        stored: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if value is None:
                continue
            if isinstance(value, ToolChoice | ResponseFormat):
                value = value.to_stored()
            elif isinstance(value, tuple):
                value = list(value)
            stored[item.name] = value
        return stored

    def after_first_call(self) -> RunParameters:
        """The parameters of the calls after a run's first: a forcing ``tool_choice``
        applies to the first call only, or the model could never answer in words."""
        if self.tool_choice is not None and self.tool_choice.forcing:
            return replace(self, tool_choice=None)
        return self

    def without_tools(self) -> RunParameters:
        """The parameters of a call that offers no tools: no tool choice to make."""
        if self.tool_choice is None and self.parallel_tool_calls is None:
            return self
        return replace(self, tool_choice=None, parallel_tool_calls=None)

    def check_tools(self, names: Collection[str]) -> None:
        """Refuse a ``tool_choice`` that needs a tool the call does not offer."""
        choice = self.tool_choice
        if choice is None or not choice.forcing:
            return
        if choice.mode == "tool" and choice.name not in names:
            offered = ", ".join(sorted(names)) or "none"
            raise ParameterError(
                "tool_not_offered",
                f"tool_choice names {choice.name!r}, which is not offered (offered: {offered}).",
                field="tool_choice.name",
            )
        if not names:
            raise ParameterError(
                "tool_not_offered",
                f"tool_choice {choice.mode!r} needs at least one offered tool.",
                field="tool_choice",
            )


_READERS: dict[str, Any] = {
    "instructions": lambda v: _text("instructions", v),
    "model": lambda v: _text("model", v, MAX_MODEL_CHARS),
    "temperature": lambda v: _number("temperature", v, TEMPERATURE_RANGE),
    "top_p": lambda v: _number("top_p", v, TOP_P_RANGE),
    "max_output_tokens": lambda v: _integer("max_output_tokens", v, *OUTPUT_TOKENS_RANGE),
    "stop": _stop,
    "seed": lambda v: _integer("seed", v, *SEED_RANGE),
    "reasoning_effort": lambda v: _choice("reasoning_effort", v, REASONING_EFFORTS),
    "tool_choice": ToolChoice.from_input,
    "parallel_tool_calls": lambda v: _boolean("parallel_tool_calls", v),
    "response_format": ResponseFormat.from_input,
}


def _choice(name: str, value: Any, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise _invalid(name, f"must be one of {', '.join(choices)}; got {value!r}.")
    return value


def _boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _invalid(name, "must be a boolean.")
    return value


@dataclass(frozen=True)
class ParameterSupport:
    """What one provider adapter can honour; everything else is refused.

    ``instructions`` (a system message) and ``model`` (one of the entry's
    models) are honoured by every provider and checked by the provider itself.
    """

    sampling: frozenset[str] = frozenset()
    """Which of :data:`SAMPLING` it maps."""
    reasoning_efforts: frozenset[str] = frozenset()
    tool_choices: frozenset[str] = frozenset()
    """Among ``auto``, ``none``, ``required`` and ``tool`` (one named tool)."""
    parallel_tool_calls: frozenset[bool] = frozenset()
    response_format: bool = False
    max_temperature: float = TEMPERATURE_RANGE[1]
    max_stop_sequences: int | None = None

    def check(
        self,
        parameters: RunParameters,
        provider: str,
        *,
        models: Collection[str],
        tools: Collection[str] | None = None,
    ) -> None:
        """Raise :class:`ParameterError` for what ``provider`` (its name, for the
        message) cannot honour: a model not in ``models``, an unsupported parameter,
        a ``tool_choice`` needing a tool not in ``tools`` (unchecked when ``None``)."""
        model = parameters.model
        if model is not None and model not in models:
            raise ParameterError(
                "model_not_allowed",
                f"provider {provider} does not allow model {model!r} "
                f"(allowed: {', '.join(models)}).",
                field="model",
            )
        problem = self.problem(parameters, provider)
        if problem is not None:
            raise problem
        if tools is not None:
            parameters.check_tools(tools)

    def problem(self, parameters: RunParameters, provider: str) -> ParameterError | None:
        """The first parameter ``provider`` (its name, for the message) cannot honour."""
        for name in SAMPLING:
            if getattr(parameters, name) is not None and name not in self.sampling:
                return _unsupported(provider, name, "")
        temperature = parameters.temperature
        if temperature is not None and temperature > self.max_temperature:
            return _unsupported(
                provider, "temperature", f" above {self.max_temperature:g} (got {temperature:g})"
            )
        stop = parameters.stop
        if stop is not None and self.max_stop_sequences and len(stop) > self.max_stop_sequences:
            return _unsupported(
                provider, "stop", f" with more than {self.max_stop_sequences} sequences"
            )
        effort = parameters.reasoning_effort
        if effort is not None and effort not in self.reasoning_efforts:
            return _unsupported(
                provider, "reasoning_effort", f" {effort!r}", self.reasoning_efforts
            )
        choice = parameters.tool_choice
        if choice is not None and choice.mode not in self.tool_choices:
            shown = repr(choice.to_stored()) if choice.mode != "tool" else "naming one tool"
            return _unsupported(provider, "tool_choice", f" {shown}", self.tool_choices)
        parallel = parameters.parallel_tool_calls
        if parallel is not None and parallel not in self.parallel_tool_calls:
            return _unsupported(provider, "parallel_tool_calls", f" {str(parallel).lower()}")
        if parameters.response_format is not None and not self.response_format:
            return _unsupported(provider, "response_format", "")
        return None


def _unsupported(
    provider: str, name: str, value: str, supported: Collection[str] = ()
) -> ParameterError:
    hint = f" (it takes {', '.join(sorted(supported))})" if supported else ""
    return ParameterError(
        "unsupported_parameter",
        f"provider {provider} cannot honour {name}{value}{hint}.",
        field=name,
    )
