"""Run parameters as each adapter sends them: exact request bodies, and refusals.

Every parameter a provider can honour is pinned to its documented request
field (OpenAI Chat Completions, Anthropic Messages, Gemini generateContent,
Ollama /api/chat); one it cannot honour raises ParameterError before any
request is sent.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.parameters import RunParameters
from llm_conversations.exceptions import ParameterError
from llm_conversations.providers import (
    AnthropicProvider,
    EchoProvider,
    GeminiProvider,
    OllamaProvider,
    OpenAIProvider,
    Provider,
)
from llm_conversations.providers.anthropic import anthropic_schema

from .conftest import TOOLS, WEATHER_SCHEMA, MakeProvider, Recorder
from .test_anthropic import TEXT_REPLY as ANTHROPIC_REPLY
from .test_gemini import TEXT_REPLY as GEMINI_REPLY
from .test_ollama import TEXT_REPLY as OLLAMA_REPLY
from .test_openai import TEXT_REPLY as OPENAI_REPLY

MESSAGES = [ChatMessage.system("Stored rule."), ChatMessage.user("Weather in Paris?")]
# Closed and fully required: fits OpenAI's strict mode as it is.
ANSWER = {
    "title": "Weather",
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}
EVERYTHING: dict[str, Any] = {
    "instructions": "Answer in French.",
    "model": "other-model",
    "temperature": 0.5,
    "top_p": 0.9,
    "max_output_tokens": 300,
    "stop": ["END"],
    "seed": 7,
    "tool_choice": {"name": "get_weather"},
    "parallel_tool_calls": False,
    "response_format": ANSWER,
}
WIRE_TOOLS_OPENAI = [spec.to_wire() for spec in TOOLS]


def sent(
    make_provider: MakeProvider,
    cls: type[Provider],
    reply: dict[str, Any],
    parameters: dict[str, Any],
    *,
    tools: Any = TOOLS,
    **options: Any,
) -> tuple[httpx.Request, dict[str, Any]]:
    recorder = Recorder(httpx.Response(200, json=reply))
    provider, _ = make_provider(
        cls, recorder, model="test-model", models=["other-model"], **options
    )
    provider.complete(MESSAGES, tools=tools, parameters=parameters)
    return recorder.requests[0], recorder.body


def refused(
    make_provider: MakeProvider, cls: type[Provider], parameters: dict[str, Any]
) -> ParameterError:
    recorder = Recorder()
    provider, _ = make_provider(cls, recorder)
    with pytest.raises(ParameterError) as info:
        provider.complete(MESSAGES, tools=TOOLS, parameters=parameters)
    assert recorder.requests == []  # refused before anything was sent
    return info.value


# OpenAI-compatible ----------------------------------------------------------------


def test_openai_maps_every_parameter(make_provider: MakeProvider) -> None:
    _, body = sent(
        make_provider,
        OpenAIProvider,
        OPENAI_REPLY,
        {**EVERYTHING, "reasoning_effort": "low"},
        cache=False,  # prompt_cache_key is pinned in test_openai.py
    )
    assert body == {
        "model": "other-model",
        "messages": [
            {"role": "system", "content": "Answer in French."},
            {"role": "system", "content": "Stored rule."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "tools": WIRE_TOOLS_OPENAI,
        "temperature": 0.5,
        "top_p": 0.9,
        "max_completion_tokens": 300,
        "stop": ["END"],
        "seed": 7,
        "reasoning_effort": "low",
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": False,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "Weather", "schema": ANSWER, "strict": True},
        },
    }


def test_openai_run_values_override_options(make_provider: MakeProvider) -> None:
    _, body = sent(
        make_provider,
        OpenAIProvider,
        OPENAI_REPLY,
        {"temperature": 1.0, "max_output_tokens": 50, "tool_choice": "required"},
        temperature=0.1,
        max_tokens=999,
        tool_choice="auto",
        user="u-1",
    )
    # The entry's max_tokens would contradict the run's limit: it is not sent.
    assert "max_tokens" not in body
    assert (body["temperature"], body["max_completion_tokens"], body["tool_choice"]) == (
        1.0,
        50,
        "required",
    )
    assert body["user"] == "u-1"


def test_openai_schema_outside_strict_mode_is_sent_without_it(make_provider: MakeProvider) -> None:
    loose = {"type": "object", "properties": {"city": {"type": "string"}}}
    _, body = sent(make_provider, OpenAIProvider, OPENAI_REPLY, {"response_format": loose})
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": loose, "strict": False},
    }


def test_a_call_without_tools_sends_no_tool_choice(make_provider: MakeProvider) -> None:
    parameters = {"tool_choice": "required", "parallel_tool_calls": True}
    _, body = sent(make_provider, OpenAIProvider, OPENAI_REPLY, parameters, tools=None)
    assert "tool_choice" not in body
    assert "parallel_tool_calls" not in body
    assert "tools" not in body


@pytest.mark.parametrize(
    ("parameters", "field", "words"),
    [
        ({"reasoning_effort": "max"}, "reasoning_effort", "cannot honour reasoning_effort 'max'"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "more than 4 sequences"),
        ({"model": "gpt-5"}, "model", "does not allow model 'gpt-5' (allowed: test-model)"),
        ({"tool_choice": {"name": "nope"}}, "tool_choice.name", "'nope', which is not offered"),
    ],
)
def test_openai_refusals(
    make_provider: MakeProvider, parameters: dict[str, Any], field: str, words: str
) -> None:
    error = refused(make_provider, OpenAIProvider, parameters)
    assert error.field == field
    assert words in error.message


# Anthropic ---------------------------------------------------------------------------


def test_anthropic_maps_every_parameter(make_provider: MakeProvider) -> None:
    request, body = sent(
        make_provider,
        AnthropicProvider,
        ANTHROPIC_REPLY,
        {**{k: v for k, v in EVERYTHING.items() if k != "seed"}, "reasoning_effort": "high"},
        cache=False,  # the breakpoints are pinned in test_anthropic.py
    )
    assert request.url.path == "/v1/messages"
    assert body == {
        "model": "other-model",
        "max_tokens": 300,
        "system": "Answer in French.\n\nStored rule.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather",
                "input_schema": WEATHER_SCHEMA,
            },
            {
                "name": "get_time",
                "description": "Current time",
                "input_schema": {"type": "object", "properties": {}},
            },
        ],
        "temperature": 0.5,
        "top_p": 0.9,
        "stop_sequences": ["END"],
        "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        "output_config": {
            "effort": "high",
            "format": {"type": "json_schema", "schema": ANSWER},
        },
    }


@pytest.mark.parametrize(
    ("parameters", "tool_choice"),
    [
        ({"tool_choice": "auto"}, {"type": "auto"}),
        ({"tool_choice": "required"}, {"type": "any"}),
        ({"tool_choice": "none", "parallel_tool_calls": False}, {"type": "none"}),
        ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
        ({"parallel_tool_calls": True}, None),
    ],
)
def test_anthropic_tool_choice(
    make_provider: MakeProvider, parameters: dict[str, Any], tool_choice: Any
) -> None:
    _, body = sent(make_provider, AnthropicProvider, ANTHROPIC_REPLY, parameters)
    assert body.get("tool_choice") == tool_choice


def test_anthropic_run_values_replace_and_merge_options(make_provider: MakeProvider) -> None:
    _, body = sent(
        make_provider,
        AnthropicProvider,
        ANTHROPIC_REPLY,
        {"tool_choice": "auto", "max_output_tokens": 10, "reasoning_effort": "low"},
        tool_choice={"type": "tool", "name": "get_time"},
        max_tokens=2048,
        output_config={"effort": "max"},
    )
    assert body["tool_choice"] == {"type": "auto"}  # replaced, never mixed
    assert body["max_tokens"] == 10
    assert body["output_config"] == {"effort": "low"}


def test_anthropic_schema_closes_objects_and_describes_refused_constraints() -> None:
    schema = {
        "type": "object",
        "properties": {
            "age": {"type": "integer", "minimum": 0, "description": "Years."},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "home": {"type": "object", "properties": {"city": {"type": "string"}}},
            "open": {"type": "object", "additionalProperties": True},
        },
        "required": ["age"],
    }
    assert anthropic_schema(schema) == {
        "type": "object",
        "properties": {
            "age": {"type": "integer", "description": "Years.\n\n{minimum: 0}"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "{minItems: 2}"},
            "home": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "additionalProperties": False,
            },
            "open": {"type": "object", "additionalProperties": True},
        },
        "required": ["age"],
        "additionalProperties": False,
    }
    assert schema["properties"]["age"]["minimum"] == 0  # the input is not changed


@pytest.mark.parametrize(
    ("parameters", "field", "words"),
    [
        ({"seed": 1}, "seed", "provider 'anthropic' cannot honour seed."),
        ({"temperature": 1.5}, "temperature", "cannot honour temperature above 1 (got 1.5)"),
        ({"reasoning_effort": "none"}, "reasoning_effort", "it takes high, low, max, medium"),
    ],
)
def test_anthropic_refusals(
    make_provider: MakeProvider, parameters: dict[str, Any], field: str, words: str
) -> None:
    error = refused(make_provider, AnthropicProvider, parameters)
    assert (error.code, error.field) == ("unsupported_parameter", field)
    assert words in error.message


# Gemini ------------------------------------------------------------------------------


def test_gemini_maps_every_parameter(make_provider: MakeProvider) -> None:
    request, body = sent(
        make_provider,
        GeminiProvider,
        GEMINI_REPLY,
        {
            **{k: v for k, v in EVERYTHING.items() if k != "parallel_tool_calls"},
            "reasoning_effort": "minimal",
        },
    )
    assert request.url.path == "/v1beta/models/other-model:generateContent"
    assert body == {
        "systemInstruction": {"parts": [{"text": "Answer in French."}, {"text": "Stored rule."}]},
        "contents": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Current weather",
                        "parametersJsonSchema": WEATHER_SCHEMA,
                    },
                    {
                        "name": "get_time",
                        "description": "Current time",
                        "parametersJsonSchema": {"type": "object", "properties": {}},
                    },
                ]
            }
        ],
        "generationConfig": {
            "temperature": 0.5,
            "topP": 0.9,
            "maxOutputTokens": 300,
            "seed": 7,
            "stopSequences": ["END"],
            "thinkingConfig": {"thinkingLevel": "minimal"},
            "responseMimeType": "application/json",
            "responseJsonSchema": ANSWER,
        },
        "toolConfig": {
            "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
        },
    }


@pytest.mark.parametrize(
    ("choice", "mode"), [("auto", "AUTO"), ("required", "ANY"), ("none", "NONE")]
)
def test_gemini_tool_choice_modes(make_provider: MakeProvider, choice: str, mode: str) -> None:
    _, body = sent(make_provider, GeminiProvider, GEMINI_REPLY, {"tool_choice": choice})
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": mode}}


def test_gemini_run_values_merge_into_the_entry_generation_config(
    make_provider: MakeProvider,
) -> None:
    _, body = sent(
        make_provider,
        GeminiProvider,
        GEMINI_REPLY,
        {"temperature": 1.0, "reasoning_effort": "high", "parallel_tool_calls": True},
        generationConfig={
            "temperature": 0.1,
            "candidateCount": 1,
            "thinkingConfig": {"thinkingBudget": 512},
        },
    )
    assert body["generationConfig"] == {
        "temperature": 1.0,
        "candidateCount": 1,
        "thinkingConfig": {"thinkingLevel": "high"},  # never both a budget and a level
    }


@pytest.mark.parametrize(
    ("parameters", "field"),
    [
        ({"parallel_tool_calls": False}, "parallel_tool_calls"),
        ({"stop": ["1", "2", "3", "4", "5", "6"]}, "stop"),
        ({"reasoning_effort": "xhigh"}, "reasoning_effort"),
    ],
)
def test_gemini_refusals(
    make_provider: MakeProvider, parameters: dict[str, Any], field: str
) -> None:
    error = refused(make_provider, GeminiProvider, parameters)
    assert (error.code, error.field) == ("unsupported_parameter", field)
    assert "provider 'gemini' cannot honour" in error.message


# Ollama ------------------------------------------------------------------------------


def test_ollama_maps_every_parameter(make_provider: MakeProvider) -> None:
    _, body = sent(
        make_provider,
        OllamaProvider,
        OLLAMA_REPLY,
        {
            **{
                k: v
                for k, v in EVERYTHING.items()
                if k not in ("tool_choice", "parallel_tool_calls")
            },
            "reasoning_effort": "medium",
            "tool_choice": "auto",
            "parallel_tool_calls": True,
        },
        num_ctx=8192,
    )
    assert body == {
        "model": "other-model",
        "messages": [
            {"role": "system", "content": "Answer in French."},
            {"role": "system", "content": "Stored rule."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "stream": False,
        "tools": WIRE_TOOLS_OPENAI,
        "options": {
            "num_ctx": 8192,
            "temperature": 0.5,
            "top_p": 0.9,
            "seed": 7,
            "num_predict": 300,
            "stop": ["END"],
        },
        "think": "medium",
        "format": ANSWER,
    }


def test_ollama_honours_tool_choice_none_by_offering_no_tools(
    make_provider: MakeProvider,
) -> None:
    _, body = sent(
        make_provider,
        OllamaProvider,
        OLLAMA_REPLY,
        {"tool_choice": "none", "reasoning_effort": "none"},
    )
    assert "tools" not in body
    assert body["think"] is False


@pytest.mark.parametrize(
    ("parameters", "field"),
    [
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tool_choice": {"name": "get_weather"}}, "tool_choice"),
        ({"parallel_tool_calls": False}, "parallel_tool_calls"),
        ({"reasoning_effort": "minimal"}, "reasoning_effort"),
    ],
)
def test_ollama_refusals(
    make_provider: MakeProvider, parameters: dict[str, Any], field: str
) -> None:
    error = refused(make_provider, OllamaProvider, parameters)
    assert (error.code, error.field) == ("unsupported_parameter", field)
    assert "provider 'ollama' cannot honour" in error.message


# Echo and custom adapters --------------------------------------------------------------


def test_echo_records_parameters_and_applies_those_that_shape_its_reply() -> None:
    echo = EchoProvider(models=["echo-2"])
    reply = echo.complete(
        [ChatMessage.user("one two three END four")],
        parameters={"stop": "END", "max_output_tokens": 5, "model": "echo-2", "seed": 3},
    )
    assert (reply.content, reply.finish_reason, reply.model) == ("one t", "length", "echo-2")
    assert reply.raw["parameters"] == {
        "model": "echo-2",
        "max_output_tokens": 5,
        "stop": ["END"],
        "seed": 3,
    }


def test_echo_tool_choice_none_and_one_call_at_a_time() -> None:
    asking = (
        '{"tool_calls": [{"function": {"name": "get_time", "arguments": {}}},'
        ' {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}'
    )
    echo = EchoProvider()
    words = echo.complete(
        [ChatMessage.user(asking)], tools=TOOLS, parameters={"tool_choice": "none"}
    )
    assert (words.content, words.tool_calls) == (asking, ())
    one = echo.complete(
        [ChatMessage.user(asking)], tools=TOOLS, parameters={"parallel_tool_calls": False}
    )
    assert [call.name for call in one.tool_calls] == ["get_time"]


class Plain(Provider):
    """An adapter that declares no parameter support."""

    backend = "plain"
    uses_http = False

    def send(self, request: Any) -> Any:
        return EchoProvider().send(request)


def test_an_adapter_declaring_nothing_honours_instructions_and_refuses_the_rest() -> None:
    provider = Plain(model="m")
    reply = provider.complete(MESSAGES, parameters={"instructions": "Be brief."})
    assert reply.content == "Weather in Paris?"
    with pytest.raises(ParameterError) as info:
        provider.complete(MESSAGES, parameters=RunParameters.from_input({"temperature": 0}))
    assert (info.value.code, info.value.field) == ("unsupported_parameter", "temperature")
    assert info.value.message == "provider 'plain' cannot honour temperature."
