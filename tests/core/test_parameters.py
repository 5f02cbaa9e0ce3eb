"""Run parameters and structured output as values: validation, stored form, judging answers."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.core.parameters import (
    PARAMETER_NAMES,
    ParameterSupport,
    RunParameters,
    ToolChoice,
)
from llm_conversations.core.structured import ResponseFormat, repairs_so_far
from llm_conversations.exceptions import ParameterError

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number", "minimum": -90}},
    "required": ["city", "celsius"],
}


def test_every_parameter_round_trips_through_its_stored_form() -> None:
    given: dict[str, Any] = {
        "instructions": "Be brief.",
        "model": "m",
        "temperature": 1,
        "top_p": 0.5,
        "max_output_tokens": 2.0,
        "stop": "END",
        "seed": -3,
        "reasoning_effort": "high",
        "tool_choice": {"name": "get_time"},
        "parallel_tool_calls": False,
        "response_format": CITY,
    }
    parameters = RunParameters.from_input(given)
    assert set(given) == set(PARAMETER_NAMES)
    assert parameters.to_stored() == {
        **given,
        "temperature": 1.0,
        "max_output_tokens": 2,
        "stop": ["END"],
    }
    assert RunParameters.from_input(parameters.to_stored()) == parameters
    assert RunParameters.from_input({"temperature": None}).to_stored() == {}


@pytest.mark.parametrize(
    ("given", "field", "code"),
    [
        ({"temperature": 2.5}, "temperature", "invalid_parameter"),
        ({"temperature": True}, "temperature", "invalid_parameter"),
        ({"temperature": float("nan")}, "temperature", "invalid_parameter"),
        ({"top_p": -0.1}, "top_p", "invalid_parameter"),
        ({"max_output_tokens": 0}, "max_output_tokens", "invalid_parameter"),
        ({"max_output_tokens": 1.5}, "max_output_tokens", "invalid_parameter"),
        ({"max_output_tokens": 2**70}, "max_output_tokens", "invalid_parameter"),
        ({"max_output_tokens": 2**31}, "max_output_tokens", "invalid_parameter"),
        ({"seed": 2**63}, "seed", "invalid_parameter"),
        ({"stop": []}, "stop", "invalid_parameter"),
        ({"stop": ["ok", ""]}, "stop[1]", "invalid_parameter"),
        ({"instructions": ""}, "instructions", "invalid_parameter"),
        ({"instructions": "a\x00b"}, "instructions", "invalid_text"),
        ({"model": "m" * 201}, "model", "invalid_parameter"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort", "invalid_parameter"),
        ({"tool_choice": "any"}, "tool_choice", "invalid_parameter"),
        ({"tool_choice": {"name": "x", "type": "function"}}, "tool_choice", "invalid_parameter"),
        ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "invalid_parameter"),
        ({"response_format": {"type": "string"}}, "response_format", "invalid_response_format"),
        (
            {"response_format": {"type": "object", "properties": 3}},
            "response_format",
            "invalid_response_format",
        ),
        ({"response_format": "json"}, "response_format", "invalid_response_format"),
        ({"temprature": 0.2}, "temprature", "unknown_parameter"),
    ],
)
def test_invalid_parameters_name_their_field(given: dict[str, Any], field: str, code: str) -> None:
    with pytest.raises(ParameterError) as info:
        RunParameters.from_input(given)
    assert (info.value.code, info.value.field) == (code, field)


def test_a_forcing_tool_choice_applies_to_the_first_call_only() -> None:
    forced = RunParameters.from_input({"tool_choice": "required", "temperature": 0.1})
    assert forced.after_first_call() == RunParameters(temperature=0.1)
    named = RunParameters(tool_choice=ToolChoice("tool", "get_time"))
    assert named.after_first_call().tool_choice is None
    kept = RunParameters(tool_choice=ToolChoice("none"))
    assert kept.after_first_call() is kept


def test_a_named_tool_must_be_offered_and_a_forced_call_needs_tools() -> None:
    named = RunParameters(tool_choice=ToolChoice("tool", "get_time"))
    named.check_tools(["get_time"])
    with pytest.raises(ParameterError) as info:
        named.check_tools(["get_weather"])
    assert (info.value.code, info.value.field) == ("tool_not_offered", "tool_choice.name")
    with pytest.raises(ParameterError):
        RunParameters(tool_choice=ToolChoice("required")).check_tools([])
    RunParameters(tool_choice=ToolChoice("none")).check_tools([])


def test_support_refuses_what_is_not_declared() -> None:
    support = ParameterSupport(
        sampling=frozenset({"temperature"}), tool_choices=frozenset({"auto"})
    )
    assert support.problem(RunParameters(temperature=0.3), "'p'") is None
    error = support.problem(RunParameters(top_p=0.3), "'p'")
    assert error is not None
    assert error.message == "provider 'p' cannot honour top_p."
    error = support.problem(RunParameters(tool_choice=ToolChoice("none")), "'p'")
    assert error is not None
    assert error.message == ("provider 'p' cannot honour tool_choice 'none' (it takes auto).")
    assert support.problem(RunParameters(response_format=ResponseFormat(CITY)), "'p'")


# Structured output ----------------------------------------------------------------


def test_judging_an_answer() -> None:
    schema = ResponseFormat(CITY)
    assert schema.judge('{"city": "Paris", "celsius": 18}').value == {
        "city": "Paris",
        "celsius": 18,
    }
    fenced = schema.judge('```json\n{"city": "Paris", "celsius": 18.5}\n```')
    assert fenced.valid
    assert fenced.value["celsius"] == 18.5
    missing = schema.judge('{"city": "Paris"}')
    assert missing.problem == "at the top level: 'celsius' is a required property."
    assert schema.judge('{"city": "Paris", "celsius": -100}').problem == (
        "at /celsius: -100 is less than the minimum of -90."
    )
    assert "not valid JSON" in (schema.judge("Paris, 18 degrees").problem or "")
    assert "not valid JSON" in (schema.judge('{"city": "P", "celsius": NaN}').problem or "")
    assert "not finite" in (schema.judge('{"city": "P", "celsius": 1e400}').problem or "")
    assert "NUL" in (schema.judge('{"city": "P\\u0000", "celsius": 1}').problem or "")
    assert len(schema.judge("x" * 5000).problem or "") <= 500


def test_a_schema_is_strict_only_when_every_object_is_closed_and_fully_required() -> None:
    assert not ResponseFormat(CITY).strict
    closed = {**CITY, "additionalProperties": False}
    assert ResponseFormat(closed).strict
    nested = {
        **closed,
        "properties": {**CITY["properties"], "home": {"type": "object", "properties": {}}},
        "required": ["city", "celsius", "home"],
    }
    assert not ResponseFormat(nested).strict


def test_the_name_is_a_usable_title_or_response() -> None:
    assert ResponseFormat({**CITY, "title": "City_1"}).name == "City_1"
    assert ResponseFormat({**CITY, "title": "A city"}).name == "response"
    assert ResponseFormat(CITY).name == "response"


class Forecast(pydantic.BaseModel):
    city: str
    celsius: float


def test_a_pydantic_model_gives_its_schema() -> None:
    schema = ResponseFormat.from_input(Forecast)
    assert schema.name == "Forecast"
    assert schema.schema["required"] == ["city", "celsius"]
    assert Forecast.model_validate(schema.judge('{"city": "Oslo", "celsius": -2}').value)
    assert (
        RunParameters.from_input({"response_format": Forecast}).to_stored()["response_format"]
        == Forecast.model_json_schema()
    )


def test_repairs_are_the_user_turns_after_the_runs_first() -> None:
    earlier = [ChatMessage.user("hi"), ChatMessage.assistant("hello")]
    run = [
        ChatMessage.user("weather?"),
        ChatMessage.assistant_tool_calls([ToolCall("a", "get_time", {})]),
        ChatMessage.tool_result("a", "09:00"),
        ChatMessage.assistant("not json"),
        ChatMessage.user("repair"),
        ChatMessage.assistant("still not"),
        ChatMessage.user("repair"),
    ]
    assert repairs_so_far(earlier + run, 3) == 2
    assert repairs_so_far(earlier + run[:4], 2) == 0
    assert repairs_so_far(earlier + run[:1], 0) == 0
