"""``checks/providers.py``: E009-E019, E040-E048, W010, W041: the PROVIDERS entries, the
default, title and summary providers, fallbacks and circuit breakers."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from llm_conversations.checks import check_providers
from tests.checks.broken import entry


def provider_ids(value: dict[str, Any], debug: bool = True) -> list[str]:
    with override_settings(LLM_CONVERSATIONS=value, DEBUG=debug):
        return [message.id for message in check_providers()]


def test_valid_providers_pass() -> None:
    assert provider_ids(entry(BACKEND="anthropic", MODEL="claude", API_KEY="k", OPTIONS={})) == []


def test_e010_providers_not_a_dict() -> None:
    assert provider_ids({"PROVIDERS": ["openai"]}) == ["llm_conversations.E010"]
    assert provider_ids({"PROVIDERS": {}}) == ["llm_conversations.E010"]


def test_e011_entry_not_a_dict() -> None:
    assert provider_ids({"PROVIDERS": {"p": "openai"}, "DEFAULT_PROVIDER": "p"}) == [
        "llm_conversations.E011"
    ]


def test_e012_unknown_backend() -> None:
    assert provider_ids(entry(BACKEND="mistral", MODEL="m")) == ["llm_conversations.E012"]
    assert provider_ids(entry(BACKEND="no.such.Module", MODEL="m")) == ["llm_conversations.E012"]
    # An unhashable BACKEND is reported, not a crash of the hosted-key rule.
    assert provider_ids(entry(BACKEND=["openai"], MODEL="m")) == ["llm_conversations.E012"]


def test_e013_missing_model() -> None:
    assert provider_ids(entry(BACKEND="ollama")) == ["llm_conversations.E013"]


def test_e014_missing_key_for_hosted_backend() -> None:
    assert provider_ids(entry(BACKEND="gemini", MODEL="gemini-2.5-flash")) == [
        "llm_conversations.E014"
    ]
    # An OpenAI-compatible server at its own URL may need no key.
    assert provider_ids(entry(BACKEND="openai", MODEL="m", BASE_URL="http://localhost:1/v1")) == []


def test_e014_the_responses_backend_needs_a_key_unless_at_its_own_url() -> None:
    assert provider_ids(entry(BACKEND="openai_responses", MODEL="gpt-5")) == [
        "llm_conversations.E014"
    ]
    local = entry(BACKEND="openai_responses", MODEL="m", BASE_URL="http://localhost:1/v1")
    assert provider_ids(local) == []


def test_e015_default_provider_not_configured() -> None:
    value = {"PROVIDERS": {"p": {"BACKEND": "ollama", "MODEL": "m"}}, "DEFAULT_PROVIDER": "q"}
    assert provider_ids(value) == ["llm_conversations.E015"]


@pytest.mark.parametrize("title", ["q", ["p"], 1])
def test_e009_title_provider_not_configured(title: Any) -> None:
    value = {"PROVIDERS": {"p": {"BACKEND": "ollama", "MODEL": "m"}}, "DEFAULT_PROVIDER": "p"}
    assert provider_ids({**value, "TITLE_PROVIDER": title}) == ["llm_conversations.E009"]
    # Off (the default) or naming an entry: no error.
    assert provider_ids({**value, "TITLE_PROVIDER": None}) == []
    assert provider_ids({**value, "TITLE_PROVIDER": "p"}) == []


def test_e016_unknown_entry_key() -> None:
    assert provider_ids(entry(BACKEND="ollama", MODEL="m", MODLE="x")) == ["llm_conversations.E016"]


@pytest.mark.parametrize(
    "values", [{"TIMEOUT": 0}, {"TIMEOUT": True}, {"MAX_RETRIES": -1}, {"MAX_RETRIES": 1.5}]
)
def test_e017_bad_timeout_or_retries(values: dict[str, Any]) -> None:
    assert provider_ids(entry(BACKEND="ollama", MODEL="m", **values)) == ["llm_conversations.E017"]


def test_e018_options_not_a_dict() -> None:
    assert provider_ids(entry(BACKEND="ollama", MODEL="m", OPTIONS=[1])) == [
        "llm_conversations.E018"
    ]


@pytest.mark.parametrize("stream", ["no", 0, None])
def test_e048_stream_not_a_boolean(stream: Any) -> None:
    assert provider_ids(entry(BACKEND="ollama", MODEL="m", STREAM=stream)) == [
        "llm_conversations.E048"
    ]


@pytest.mark.parametrize("stream", [True, False])
def test_stream_may_be_turned_off(stream: bool) -> None:
    assert provider_ids(entry(BACKEND="ollama", MODEL="m", STREAM=stream)) == []


@pytest.mark.parametrize("models", ["gpt-4o", ["gpt-4o", ""], [None], {"gpt-4o": 1}])
def test_e019_models_not_a_list_of_names(models: Any) -> None:
    assert provider_ids(entry(BACKEND="ollama", MODEL="m", MODELS=models)) == [
        "llm_conversations.E019"
    ]


def test_models_may_list_other_models() -> None:
    assert provider_ids(entry(BACKEND="ollama", MODEL="m", MODELS=["m", "m2"])) == []
    assert provider_ids(entry(BACKEND="ollama", MODEL="m", MODELS=[])) == []


@pytest.mark.parametrize(
    "model_info",
    [
        [],
        {"m": []},
        {"m": {"context_windw": 8000}},
        {"m": {"context_window": 0}},
        {"m": {"max_output_tokens": 1.5}},
        {"m": {"context_window": True}},
        {"m": {"prices": ["1"]}},
        {"m": {"prices": {"input": "1"}}},
        {"m": {"prices": {"input": 2.5, "output": "10"}}},
        {"m": {"prices": {"input": "-1", "output": "10"}}},
        {"m": {"prices": {"input": "NaN", "output": "10"}}},
        {"m": {"prices": {"input": "two", "output": "10"}}},
        {"m": {"prices": {"input": "1", "output": "1", "cache": "1"}}},
    ],
)
def test_e040_invalid_model_info(model_info: Any) -> None:
    assert provider_ids(entry(BACKEND="ollama", MODEL="m", MODEL_INFO=model_info)) == [
        "llm_conversations.E040"
    ]


def test_e041_and_w041_context_strategy() -> None:
    assert provider_ids(entry(BACKEND="ollama", MODEL="m", CONTEXT_STRATEGY=1)) == [
        "llm_conversations.E041"
    ]
    # A model of the shipped defaults, or one given a context window: no warning.
    known = entry(BACKEND="openai", MODEL="gpt-4o", API_KEY="k", CONTEXT_STRATEGY="error")
    assert provider_ids(known) == []
    given = entry(
        BACKEND="ollama",
        MODEL="m",
        MODELS=["n"],
        MODEL_INFO={"m": {"context_window": 8192}, "n": {"context_window": 4096}},
        CONTEXT_STRATEGY="truncate",
    )
    assert provider_ids(given) == []
    one_blind = entry(
        BACKEND="ollama",
        MODEL="m",
        MODELS=["n"],
        MODEL_INFO={"m": {"context_window": 8192}},
        CONTEXT_STRATEGY="truncate",
    )
    with override_settings(LLM_CONVERSATIONS=one_blind):
        (warning,) = check_providers()
    assert warning.id == "llm_conversations.W041"
    assert "'n'" in warning.msg
    assert "'m'" not in warning.msg


def test_e042_summary_provider() -> None:
    summarizing = entry(BACKEND="openai", MODEL="gpt-4o", API_KEY="k", CONTEXT_STRATEGY="summarize")
    assert provider_ids(summarizing) == ["llm_conversations.E042"]
    assert provider_ids({**summarizing, "SUMMARY_PROVIDER": "p"}) == []
    assert provider_ids({**entry(BACKEND="ollama", MODEL="m"), "SUMMARY_PROVIDER": 3}) == [
        "llm_conversations.E042"
    ]


def ollama(**values: Any) -> dict[str, Any]:
    return {"BACKEND": "ollama", "MODEL": "m", **values}


def test_fallbacks_and_a_breaker_pass() -> None:
    value = {
        "PROVIDERS": {
            "p": ollama(FALLBACKS=["q", "r"], CIRCUIT_BREAKER={"FAILURES": 5, "RESET_AFTER": 30}),
            "q": ollama(FALLBACKS=["r"], CIRCUIT_BREAKER=None),
            "r": ollama(FALLBACKS=[]),
        },
        "DEFAULT_PROVIDER": "p",
    }
    assert provider_ids(value) == []


@pytest.mark.parametrize("fallbacks", ["q", ["q", ""], [3], {"q": 1}, None])
def test_e043_fallbacks_not_a_list_of_names(fallbacks: Any) -> None:
    assert provider_ids(entry(**ollama(FALLBACKS=fallbacks))) == ["llm_conversations.E043"]


def test_e044_fallback_not_an_entry() -> None:
    value = {"PROVIDERS": {"p": ollama(FALLBACKS=["q", "missing"]), "q": ollama()}}
    with override_settings(LLM_CONVERSATIONS={**value, "DEFAULT_PROVIDER": "p"}):
        (error,) = check_providers()
    assert error.id == "llm_conversations.E044"
    assert "'missing'" in error.msg


def test_e045_an_entry_its_own_fallback() -> None:
    assert provider_ids(entry(**ollama(FALLBACKS=["p"]))) == ["llm_conversations.E045"]


def test_e046_fallbacks_in_a_circle() -> None:
    value = {
        "PROVIDERS": {
            "a": ollama(FALLBACKS=["b"]),
            "b": ollama(FALLBACKS=["c"]),
            "c": ollama(FALLBACKS=["a"]),
            "d": ollama(FALLBACKS=["a"]),
        },
        "DEFAULT_PROVIDER": "d",
    }
    with override_settings(LLM_CONVERSATIONS=value):
        (error,) = check_providers()
    assert error.id == "llm_conversations.E046"
    assert "a -> b -> c -> a" in error.msg
    # Two entries falling back to the same one is no circle.
    shared = {
        "PROVIDERS": {
            "a": ollama(FALLBACKS=["b", "c"]),
            "b": ollama(FALLBACKS=["c"]),
            "c": ollama(),
        },
        "DEFAULT_PROVIDER": "a",
    }
    assert provider_ids(shared) == []


@pytest.mark.parametrize(
    "breaker",
    [
        {"FAILURES": 0, "RESET_AFTER": 30},
        {"FAILURES": True, "RESET_AFTER": 30},
        {"FAILURES": 5, "RESET_AFTER": 0},
        {"FAILURES": 5, "RESET_AFTER": float("inf")},
        {"FAILURES": 5},
        {"FAILURES": 5, "RESET_AFTER": 30, "HALF_OPEN": 1},
        5,
    ],
)
def test_e047_invalid_circuit_breaker(breaker: Any) -> None:
    assert provider_ids(entry(**ollama(CIRCUIT_BREAKER=breaker))) == ["llm_conversations.E047"]


def test_e040_valid_model_info_passes() -> None:
    model_info = {
        "m": {
            "context_window": 8192,
            "max_output_tokens": 1024,
            "prices": {"input": "0.20", "cached_input": "0.05", "output": 1},
        },
        "n": {},
    }
    assert provider_ids(entry(BACKEND="ollama", MODEL="m", MODEL_INFO=model_info)) == []


def test_w010_echo_without_debug() -> None:
    assert provider_ids(entry(BACKEND="echo", MODEL="echo"), debug=False) == [
        "llm_conversations.W010"
    ]
    assert provider_ids(entry(BACKEND="echo", MODEL="echo"), debug=True) == []
