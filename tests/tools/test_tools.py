"""The tool registry: schema generation, validation, execution, results and settings."""

import asyncio
import logging
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Optional

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from pydantic import Field
from typing_extensions import TypedDict

from llm_conversations.conf import conf
from llm_conversations.core.messages import ChatMessage, Role, ToolCall
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.tools import (
    Tool,
    ToolArgumentsError,
    ToolError,
    ToolRegistry,
    default_registry,
    format_tool_output,
    load_tool,
    tool,
    tool_result_message,
    truncate_text,
)
from tests.support import tools_fixtures

FIXTURES = "tests.support.tools_fixtures"


def call(name: str, arguments: Any = None, call_id: str = "call_1") -> ToolCall:
    return ToolCall.parse(id=call_id, name=name, arguments=arguments)


def tools_settings(*paths: str, **extra: Any) -> override_settings:
    return override_settings(LLM_CONVERSATIONS={"TOOLS": list(paths), **extra})


# Sample types for schema generation -----------------------------------------


class Unit(Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


@dataclass
class Point:
    lat: float
    lon: float = 0.0


class Window(TypedDict):
    start: str
    days: int


@tool
def get_weather(city: str, unit: Unit = Unit.CELSIUS) -> dict[str, Any]:
    """Current weather for a city.

    Only the first paragraph is the description.
    """
    return {"city": city, "unit": unit.value, "temperature": 21}


# Schema generation ----------------------------------------------------------


def schema_of(function: Any) -> dict[str, Any]:
    return tool(function).parameters


def test_schema_scalars_and_defaults() -> None:
    def f(a: str, b: int, c: float = 1.5, d: bool = False) -> None: ...

    assert schema_of(f) == {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "integer"},
            "c": {"type": "number", "default": 1.5},
            "d": {"type": "boolean", "default": False},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }


def test_schema_optional() -> None:
    def f(limit: Optional[int] = None, note: str | None = None) -> None:  # noqa: UP045
        ...

    assert schema_of(f)["properties"] == {
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    }
    assert schema_of(f)["required"] == []


def test_schema_literal() -> None:
    def f(mode: Literal["fast", "slow"] = "fast") -> None: ...

    assert schema_of(f)["properties"] == {
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"}
    }


def test_schema_enum_goes_to_defs() -> None:
    assert get_weather.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"$ref": "#/$defs/Unit", "default": "celsius"},
        },
        "required": ["city"],
        "additionalProperties": False,
        "$defs": {"Unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    }


def test_schema_list_and_dict() -> None:
    def f(tags: list[str], counts: dict[str, int]) -> None: ...

    assert schema_of(f)["properties"] == {
        "tags": {"type": "array", "items": {"type": "string"}},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
    }


def test_schema_nested_dataclass() -> None:
    def f(origin: Point) -> None: ...

    schema = schema_of(f)
    assert schema["properties"] == {"origin": {"$ref": "#/$defs/Point"}}
    assert schema["$defs"] == {
        "Point": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number", "default": 0.0}},
            "required": ["lat"],
            "additionalProperties": False,
        }
    }


def test_schema_nested_typeddict() -> None:
    def f(window: Window) -> None: ...

    assert schema_of(f)["$defs"] == {
        "Window": {
            "type": "object",
            "properties": {"start": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["start", "days"],
            "additionalProperties": False,
        }
    }


def test_schema_annotated_descriptions() -> None:
    def f(
        days: Annotated[int, Field(description="How many days", ge=1)],
        city: Annotated[str, "The city name"] = "Paris",
    ) -> None: ...

    assert schema_of(f)["properties"] == {
        "days": {"type": "integer", "description": "How many days", "minimum": 1},
        "city": {"type": "string", "description": "The city name", "default": "Paris"},
    }


def test_schema_without_parameters() -> None:
    def now() -> str:
        return "noon"

    assert schema_of(now) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_schema_keeps_property_named_title_and_data_titles() -> None:
    # Only pydantic's generated "title" keywords go; names and data stay.
    def f(title: str, meta: dict[str, str] = {"title": "x"}) -> None:  # noqa: B006
        ...

    properties = schema_of(f)["properties"]
    assert properties["title"] == {"type": "string"}
    assert properties["meta"]["default"] == {"title": "x"}


def test_parameters_named_like_pydantic_attributes() -> None:
    @tool
    def f(schema: str, _id: int, copy: bool = False) -> list[Any]:
        return [schema, _id, copy]

    assert list(f.parameters["properties"]) == ["schema", "_id", "copy"]
    result = f.execute(call("f", {"schema": "s", "_id": "7"}))
    assert (result.content, result.is_error) == ('["s", 7, false]', False)


def test_unannotated_parameter_accepts_anything() -> None:
    def f(x=3):  # type: ignore[no-untyped-def]
        return x

    assert schema_of(f)["properties"] == {"x": {"default": 3}}


# Declaration ----------------------------------------------------------------


def test_description_is_first_docstring_paragraph_cleaned() -> None:
    @tool
    def f() -> None:
        """Look up   the
        weather.

        Details that stay out.
        """

    assert f.description == "Look up the weather."
    assert get_weather.description == "Current weather for a city."


def test_missing_docstring_gives_empty_description() -> None:
    assert tool(lambda_free_function).description == ""


def lambda_free_function() -> None:
    pass


def test_decorator_with_options() -> None:
    @tool(name="weather_now", description="Explicit.", requires_approval=True)
    def f(city: str) -> str:
        """Docstring loses."""
        return city

    assert (f.name, f.description, f.requires_approval) == ("weather_now", "Explicit.", True)
    assert f.spec == ToolSpec("weather_now", "Explicit.", f.parameters)


def test_decorated_function_stays_callable() -> None:
    assert isinstance(get_weather, Tool)
    assert get_weather("Oslo", Unit.FAHRENHEIT) == {
        "city": "Oslo",
        "unit": "fahrenheit",
        "temperature": 21,
    }
    assert get_weather.__wrapped__.__name__ == "get_weather"  # type: ignore[attr-defined]
    assert get_weather.function is not None
    assert not get_weather.is_client_side
    assert get_weather.requires_approval is False


def test_explicit_schema_overrides_generation() -> None:
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "minLength": 2}},
        "required": ["q"],
    }

    @tool(schema=schema)
    def search(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    assert search.parameters == schema
    assert search.parameters is not schema  # a copy: later edits cannot leak in
    ok = search.execute(call("search", {"q": "django", "extra": 1}))
    assert ok.content == '{"q": "django", "extra": 1}'
    bad = search.execute(call("search", {"q": "d"}))
    assert bad.is_error
    assert bad.content == "Invalid arguments for search: q: 'd' is too short"


def test_invalid_explicit_schema_is_refused() -> None:
    with pytest.raises(ToolError) as info:
        Tool.client_side("broken", "", {"type": "object", "properties": {"a": {"type": 5}}})
    assert info.value.code == "invalid_tool_schema"


def test_schema_must_be_an_object() -> None:
    with pytest.raises(ToolError) as info:
        tool(schema={"type": "string"})(lambda_free_function)
    assert info.value.code == "invalid_tool_schema"


def test_invalid_tool_name() -> None:
    with pytest.raises(ToolError) as info:
        tool(name="has space")(lambda_free_function)
    assert info.value.code == "invalid_tool_name"


def test_var_args_need_an_explicit_schema() -> None:
    def f(*args: int) -> None: ...

    with pytest.raises(ToolError, match=r"parameter 'args' must be passable by keyword") as info:
        tool(f)
    assert info.value.code == "invalid_tool"


def test_unsupported_type_is_a_declaration_error() -> None:
    class Opaque:
        pass

    def f(x: Opaque) -> None: ...

    with pytest.raises(ToolError, match="cannot build a schema for f") as info:
        tool(f)
    assert info.value.code == "invalid_tool"


def test_spec_is_a_copy() -> None:
    spec = get_weather.spec
    spec.parameters["properties"].clear()
    assert get_weather.parameters["properties"] != {}
    assert spec.to_wire()["function"]["name"] == "get_weather"


# Argument validation --------------------------------------------------------


def test_missing_argument_is_an_error_result_and_the_function_does_not_run() -> None:
    ran: list[str] = []

    @tool
    def f(city: str) -> str:
        ran.append(city)
        return city

    result = f.execute(call("f", {}))
    assert result == ChatMessage.tool_result(
        "call_1", "Invalid arguments for f: city: Field required", is_error=True
    )
    assert ran == []


def test_several_argument_errors_are_all_reported() -> None:
    result = get_weather.execute(call("get_weather", {"unit": "kelvin", "when": "now"}))
    assert result.is_error
    assert result.content == (
        "Invalid arguments for get_weather: city: Field required; "
        "unit: Input should be 'celsius' or 'fahrenheit'; "
        "when: Extra inputs are not permitted"
    )


def test_nested_error_location_is_dotted() -> None:
    @tool
    def f(origin: Point) -> None: ...

    result = f.execute(call("f", {"origin": {"lat": "north"}}))
    assert result.content == (
        "Invalid arguments for f: origin.lat: Input should be a valid number, "
        "unable to parse string as a number"
    )


def test_arguments_are_coerced_to_signature_types() -> None:
    seen: dict[str, Any] = {}

    @tool
    def f(n: int, unit: Unit, origin: Point, window: Window) -> str:
        seen.update(n=n, unit=unit, origin=origin, window=window)
        return "ok"

    result = f.execute(
        call(
            "f",
            {
                "n": "3",
                "unit": "fahrenheit",
                "origin": {"lat": 1},
                "window": {"start": "mon", "days": 2},
            },
        )
    )
    assert (result.content, result.is_error) == ("ok", False)
    assert seen == {
        "n": 3,
        "unit": Unit.FAHRENHEIT,
        "origin": Point(lat=1.0),
        "window": {"start": "mon", "days": 2},
    }


def test_function_defaults_apply_to_omitted_arguments() -> None:
    default: list[int] = []

    @tool
    def f(x: list[int] = default) -> bool:
        # The very object of the signature, not a copy made by validation.
        return x is default

    assert f.execute(call("f", {})).content == "true"


def test_malformed_json_is_an_error_result() -> None:
    ran: list[int] = []

    @tool
    def f(x: int = 0) -> int:
        ran.append(x)
        return x

    bad = call("f", '{"x": 1')
    assert bad.malformed
    result = f.execute(bad)
    assert result.is_error
    assert result.content.startswith("Invalid arguments for f: the arguments are not valid JSON (")
    assert result.content.endswith('): {"x": 1. Send a JSON object.')
    assert ran == []


def test_non_object_json_is_an_error_result() -> None:
    result = get_weather.execute(call("get_weather", "[1, 2]"))
    assert result.is_error
    assert result.content == (
        "Invalid arguments for get_weather: the arguments must be a JSON object, "
        "not an array: [1, 2]."
    )


def test_validate_call_returns_keyword_arguments() -> None:
    assert get_weather.validate_call(call("get_weather", {"city": "Rome"})) == {"city": "Rome"}
    with pytest.raises(ToolArgumentsError) as info:
        get_weather.validate_call(call("get_weather", {}))
    assert info.value.code == "invalid_arguments"


# Results --------------------------------------------------------------------


class Opaque:
    def __str__(self) -> str:
        return "<opaque thing>"


@pytest.mark.parametrize(
    ("value", "content"),
    [
        ("plain text, not JSON", "plain text, not JSON"),
        ({"city": "Zürich", "t": 1.5}, '{"city": "Zürich", "t": 1.5}'),
        ([1, "two", None], '[1, "two", null]'),
        (None, "null"),
        (True, "true"),
        (Point(1.0, 2.0), '{"lat": 1.0, "lon": 2.0}'),
        (Opaque(), "<opaque thing>"),
    ],
)
def test_result_formatting(value: Any, content: str) -> None:
    @tool
    def f() -> Any:
        return value

    assert f.execute(call("f", {})) == ChatMessage.tool_result("call_1", content)


def test_truncation_at_the_exact_boundary() -> None:
    assert format_tool_output("x" * 100, max_chars=100) == "x" * 100
    marker = "\n[truncated: 60 of 101 characters shown]"
    truncated = format_tool_output("x" * 101, max_chars=100)
    assert truncated == "x" * (100 - len(marker)) + marker
    assert len(truncated) == 100


def test_truncation_marker_uses_thousands_separators() -> None:
    text = truncate_text("y" * 80_000, 50_000)
    marker = "\n[truncated: 49,953 of 80,000 characters shown]"
    assert text == "y" * 49_953 + marker
    assert len(text) == 50_000


def test_truncation_with_a_cap_smaller_than_the_marker() -> None:
    assert truncate_text("abcdefgh", 5) == "abcde"


def test_execute_caps_results_with_the_setting() -> None:
    @tool
    def big() -> str:
        return "z" * 500

    with tools_settings(TOOL_RESULT_MAX_CHARS=200):
        result = big.execute(call("big", {}))
    assert len(result.content) == 200
    assert result.content == "z" * 159 + "\n[truncated: 159 of 500 characters shown]"
    assert big.execute(call("big", {})).content == "z" * 500  # default cap is 50,000


def test_tool_result_message_formats_and_caps() -> None:
    with tools_settings(TOOL_RESULT_MAX_CHARS=10):
        message = tool_result_message("c9", {"a": "long value"}, is_error=True)
    assert message.role is Role.TOOL
    assert (message.tool_call_id, message.is_error) == ("c9", True)
    assert message.content == '{"a": "lon'


def test_exception_becomes_short_error_and_traceback_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool
    def fails(x: int) -> int:
        raise ValueError(f"no forecast for {x}")

    with caplog.at_level(logging.ERROR, logger="llm_conversations.tools"):
        result = fails.execute(call("fails", {"x": 4}, call_id="c7"))
    assert result == ChatMessage.tool_result("c7", "ValueError: no forecast for 4", is_error=True)
    assert "Traceback" not in result.content
    [record] = caplog.records
    assert record.name == "llm_conversations.tools"
    assert record.getMessage() == "Tool fails failed answering call c7."
    assert record.exc_info is not None
    assert record.exc_info[0] is ValueError
    assert "Traceback" in caplog.text


def test_exception_without_message_and_long_message() -> None:
    @tool
    def quiet() -> None:
        raise RuntimeError

    @tool
    def loud() -> None:
        raise RuntimeError("x" * 5_000)

    assert quiet.execute(call("quiet", {})).content == "RuntimeError"
    content = loud.execute(call("loud", {})).content
    assert len(content) == 1_000
    assert content.startswith("RuntimeError: xxx")
    assert content.endswith("…")


def test_async_tool_runs() -> None:
    @tool
    async def later(n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    assert later.execute(call("later", {"n": 21})).content == "42"


# Client-side tools ----------------------------------------------------------


def test_client_side_tool() -> None:
    picker = tools_fixtures.pick_colour
    assert picker.is_client_side
    assert picker.function is None
    assert picker.spec == ToolSpec(
        "pick_colour",
        "Ask the user to pick a colour in the browser.",
        {"type": "object", "properties": {"hint": {"type": "string"}}, "required": []},
    )
    with pytest.raises(ToolError) as info:
        picker.execute(call("pick_colour", {}))
    assert info.value.code == "client_side_tool"
    with pytest.raises(ToolError):
        picker()


def test_client_side_tool_arguments_are_checked_with_jsonschema() -> None:
    picker = tools_fixtures.pick_colour
    assert picker.validate_call(call("pick_colour", {"hint": "warm"})) == {"hint": "warm"}
    with pytest.raises(ToolArgumentsError) as info:
        picker.validate_call(call("pick_colour", {"hint": 3}))
    assert (
        info.value.message == "Invalid arguments for pick_colour: hint: 3 is not of type 'string'"
    )


def test_client_side_tool_defaults() -> None:
    confirm = Tool.client_side("confirm", requires_approval=True)
    assert confirm.parameters == {"type": "object", "properties": {}, "required": []}
    assert (confirm.description, confirm.requires_approval) == ("", True)


# Registry -------------------------------------------------------------------


def test_registry_basics() -> None:
    registry = ToolRegistry([get_weather, tools_fixtures.shout])
    assert registry.names() == ["get_weather", "shout"]
    assert "shout" in registry
    assert "nope" not in registry
    assert len(registry) == 2
    assert registry.get("shout").description == "Upper-case a text."
    assert [s.name for s in registry.specs()] == ["get_weather", "shout"]
    assert all(isinstance(s, ToolSpec) for s in registry.specs())
    assert registry.execute(call("shout", {"text": "hi"})).content == "HI"


def test_registry_refuses_duplicates_unless_replacing() -> None:
    registry = ToolRegistry([tools_fixtures.add])
    with pytest.raises(ToolError) as info:
        registry.register(tools_fixtures.another_add)
    assert info.value.code == "duplicate_tool"
    registry.register(tools_fixtures.another_add, replace=True)
    assert registry.get("add") is tools_fixtures.another_add


def test_registry_get_unknown() -> None:
    with pytest.raises(ToolError) as info:
        ToolRegistry([get_weather]).get("nope")
    assert info.value.code == "unknown_tool"
    assert info.value.message == "Unknown tool: nope. Available tools: get_weather."


def test_unknown_tool_call_is_an_error_result_naming_available_tools() -> None:
    registry = ToolRegistry([get_weather, tools_fixtures.add])
    result = registry.execute(call("get_wether", {"city": "Oslo"}, call_id="c3"))
    assert result == ChatMessage.tool_result(
        "c3", "Unknown tool: get_wether. Available tools: get_weather, add.", is_error=True
    )
    empty = ToolRegistry().execute(call("x", {}))
    assert empty.content == "Unknown tool: x. Available tools: none."


def test_subset_keeps_requested_order() -> None:
    registry = ToolRegistry([get_weather, tools_fixtures.add, tools_fixtures.shout])
    subset = registry.subset(["shout", "get_weather", "shout"])
    assert subset.names() == ["shout", "get_weather"]
    assert subset.get("shout") is registry.get("shout")
    assert registry.names() == ["get_weather", "add", "shout"]


def test_subset_with_unknown_names_raises_with_code() -> None:
    registry = ToolRegistry([get_weather])
    with pytest.raises(ToolError) as info:
        registry.subset(["get_weather", "a", "b"])
    assert info.value.code == "unknown_tool"
    assert info.value.message == "Unknown tools: a, b. Available tools: get_weather."


def test_registry_execute_of_client_side_tool_raises() -> None:
    registry = ToolRegistry([tools_fixtures.pick_colour])
    with pytest.raises(ToolError) as info:
        registry.execute(call("pick_colour", {}))
    assert info.value.code == "client_side_tool"


# Settings -------------------------------------------------------------------


def test_default_registry_from_settings() -> None:
    with tools_settings(f"{FIXTURES}.add", f"{FIXTURES}.shout", f"{FIXTURES}.pick_colour"):
        registry = default_registry()
        assert registry.names() == ["add", "shout", "pick_colour"]
        assert registry.get("add") is tools_fixtures.add
        shout = registry.get("shout")  # a plain function, wrapped
        assert isinstance(shout, Tool)
        assert shout.function is tools_fixtures.shout
        assert default_registry() is registry  # cached


def test_default_registry_is_rebuilt_when_settings_change() -> None:
    with tools_settings(f"{FIXTURES}.add"):
        first = default_registry()
        assert first.names() == ["add"]
    with tools_settings(f"{FIXTURES}.shout"):
        second = default_registry()
        assert second.names() == ["shout"]
    assert default_registry() is not second
    assert default_registry().names() == [path.rsplit(".", 1)[1] for path in conf.TOOLS]


def test_default_registry_with_bad_entry_is_improperly_configured() -> None:
    with (
        tools_settings(f"{FIXTURES}.NOT_A_TOOL"),
        pytest.raises(
            ImproperlyConfigured, match=r"'tests\.support\.tools_fixtures\.NOT_A_TOOL' is a int"
        ),
    ):
        default_registry()


def test_load_tool_errors() -> None:
    with pytest.raises(ToolError) as missing:
        load_tool(f"{FIXTURES}.missing")
    assert missing.value.code == "tool_import_error"
    with pytest.raises(ToolError) as not_tool:
        load_tool(f"{FIXTURES}.NOT_A_TOOL")
    assert not_tool.value.code == "not_a_tool"
    assert load_tool(f"{FIXTURES}.add") is tools_fixtures.add
