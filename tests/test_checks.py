"""System checks for LLM_CONVERSATIONS: registration, then one test per id."""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
import re
import sys
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.checks.registry import registry
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from llm_conversations import checks
from llm_conversations.checks import (
    check_attachments,
    check_installation,
    check_mcp_servers,
    check_providers,
    check_run_limits,
    check_settings,
    check_share_links,
    check_tools,
    check_trash,
    check_webhooks,
)
from llm_conversations.checks.installation import CELERY_BACKEND
from llm_conversations.providers import registry as provider_registry
from llm_conversations.tools import mcp_config

FIXTURES = "tests.support.tools_fixtures"
ID = re.compile(r"llm_conversations\.[EW]\d{3}")


def entry(**values: Any) -> dict[str, Any]:
    """Settings with one provider entry ``p``, the default."""
    return {"PROVIDERS": {"p": values}, "DEFAULT_PROVIDER": "p"}


# One broken configuration per id: (LLM_CONVERSATIONS, DEBUG).
BROKEN: dict[str, tuple[Any, bool]] = {
    "llm_conversations.E001": (["x"], True),
    "llm_conversations.E002": ({"MAX_ITERATION": 3}, True),
    "llm_conversations.E003": ({"TOOL_WORKERS": 0}, True),
    "llm_conversations.E004": ({"MAX_ITERATIONS": 10, "MAX_ITERATIONS_LIMIT": 5}, True),
    "llm_conversations.E005": ({"TOOL_TIMEOUT": 0}, True),
    "llm_conversations.E006": ({"STRUCTURED_OUTPUT_REPAIRS": -1}, True),
    "llm_conversations.E007": ({"CONVERSATION_RETENTION_DAYS": 0}, True),
    "llm_conversations.E010": ({"PROVIDERS": {}}, True),
    "llm_conversations.E011": ({"PROVIDERS": {"p": "openai"}, "DEFAULT_PROVIDER": "p"}, True),
    "llm_conversations.E012": (entry(BACKEND="mistral", MODEL="m"), True),
    "llm_conversations.E013": (entry(BACKEND="ollama"), True),
    "llm_conversations.E014": (entry(BACKEND="gemini", MODEL="gemini-2.5-flash"), True),
    "llm_conversations.E015": ({"DEFAULT_PROVIDER": "missing"}, True),
    "llm_conversations.E016": (entry(BACKEND="ollama", MODEL="m", MODLE="x"), True),
    "llm_conversations.E017": (entry(BACKEND="ollama", MODEL="m", TIMEOUT=0), True),
    "llm_conversations.E018": (entry(BACKEND="ollama", MODEL="m", OPTIONS=[1]), True),
    "llm_conversations.E048": (entry(BACKEND="ollama", MODEL="m", STREAM="no"), True),
    "llm_conversations.E009": ({"TITLE_PROVIDER": "missing"}, True),
    "llm_conversations.E019": (entry(BACKEND="ollama", MODEL="m", MODELS="m2"), True),
    "llm_conversations.W010": (entry(BACKEND="echo", MODEL="echo"), False),
    "llm_conversations.E040": (
        entry(BACKEND="ollama", MODEL="m", MODEL_INFO={"m": {"context_window": 0}}),
        True,
    ),
    "llm_conversations.E041": (
        entry(BACKEND="ollama", MODEL="m", CONTEXT_STRATEGY="shrink"),
        True,
    ),
    "llm_conversations.W041": (
        entry(BACKEND="ollama", MODEL="m", CONTEXT_STRATEGY="truncate"),
        True,
    ),
    "llm_conversations.E042": ({"SUMMARY_PROVIDER": "missing"}, True),
    "llm_conversations.E043": (entry(BACKEND="ollama", MODEL="m", FALLBACKS="q"), True),
    "llm_conversations.E044": (entry(BACKEND="ollama", MODEL="m", FALLBACKS=["q"]), True),
    "llm_conversations.E045": (entry(BACKEND="ollama", MODEL="m", FALLBACKS=["p"]), True),
    "llm_conversations.E046": (
        {
            "PROVIDERS": {
                "p": {"BACKEND": "ollama", "MODEL": "m", "FALLBACKS": ["q"]},
                "q": {"BACKEND": "ollama", "MODEL": "m", "FALLBACKS": ["p"]},
            },
            "DEFAULT_PROVIDER": "p",
        },
        True,
    ),
    "llm_conversations.E047": (
        entry(BACKEND="ollama", MODEL="m", CIRCUIT_BREAKER={"FAILURES": 0, "RESET_AFTER": 30}),
        True,
    ),
    "llm_conversations.E020": ({"TOOLS": ["no_such_module.tool"]}, True),
    "llm_conversations.E021": ({"TOOLS": [f"{FIXTURES}.add", f"{FIXTURES}.another_add"]}, True),
    "llm_conversations.E022": ({"DEFAULT_TOOLS": "add"}, True),
    "llm_conversations.E023": ({"TOOLS": [f"{FIXTURES}.add"], "DEFAULT_TOOLS": ["ad"]}, True),
    "llm_conversations.E030": ({"MCP_SERVERS": {"a.b": {"COMMAND": "x"}}}, True),
    "llm_conversations.E031": ({"MCP_SERVERS": {"s": {"ARGS": []}}}, True),
    "llm_conversations.E032": ({"MCP_SERVERS": {"s": {"COMMAND": "x", "COMAND": "y"}}}, True),
    "llm_conversations.E033": ({"MCP_SERVERS": {"s": {"COMMAND": "x", "TIMEOUT": 0}}}, True),
    "llm_conversations.E034": (
        {"MCP_SERVERS": {"s": {"URL": "http://h/mcp", "HEADERS": {"X-Key": "LLMCONV_UNSET"}}}},
        True,
    ),
    # Reported where the mcp package cannot be imported (see ``without_sdk``).
    "llm_conversations.E035": ({"MCP_SERVERS": {"s": {"COMMAND": "x"}}}, True),
    "llm_conversations.E050": ({"RUN_POLICY": "tests.no_such_module.Policy"}, True),
    "llm_conversations.E051": ({"RUN_RATE": "20 per minute"}, True),
    "llm_conversations.E052": ({"MAX_ACTIVE_RUNS_PER_USER": 0}, True),
    "llm_conversations.E053": ({"BUSY_STRATEGY": "queue"}, True),
    "llm_conversations.E054": ({"MAX_WAITING_RUNS": 0}, True),
    "llm_conversations.E060": ({"USER_DAILY_BUDGET": {"tokens": "many"}}, True),
    "llm_conversations.E061": ({"BUDGET_HOOK": "tests.no_such_module.limits"}, True),
    "llm_conversations.E070": ({"ATTACHMENT_MAX_BYTES": 0}, True),
    "llm_conversations.E071": ({"ATTACHMENT_TYPES": ["image/png", "image/svg+xml"]}, True),
    "llm_conversations.E072": ({"ATTACHMENT_MAX_PIXELS": "many"}, True),
    "llm_conversations.E073": ({"ATTACHMENT_MAX_PDF_PAGES": -1}, True),
    "llm_conversations.E074": ({"ORPHAN_ATTACHMENT_HOURS": 0}, True),
    "llm_conversations.E080": ({"WEBHOOKS": {"ops": {"URL": "ftp://x", "SECRET": "s"}}}, True),
    "llm_conversations.E081": ({"WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"}, True),
    "llm_conversations.E090": ({"SHARE_RATE": "60 a minute"}, True),
    "llm_conversations.E091": ({"TRASH_RETENTION_DAYS": 0}, True),
    "llm_conversations.E008": ({"TELEMETRY_CAPTURE_CONTENT": "false"}, True),
}


# Ids whose broken configuration is a project setting beside LLM_CONVERSATIONS.
BROKEN_PROJECT: dict[str, dict[str, Any]] = {
    # No Celery app configured in this process (see ``without_celery_app``).
    "llm_conversations.E092": {"TASKS": {"default": {"BACKEND": CELERY_BACKEND}}},
}


@pytest.fixture
def without_celery_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a process whose project never loaded its Celery module."""
    from llm_conversations import celery_backend

    monkeypatch.setattr(celery_backend, "_configured", None)


@pytest.fixture
def without_sdk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """For E035, ``import mcp`` fails as where the extra is not installed."""
    if request.node.callspec.params.get("check_id") == "llm_conversations.E035":
        monkeypatch.setitem(sys.modules, "mcp", None)


# Registration ---------------------------------------------------------------


@pytest.mark.parametrize(
    "check",
    [
        check_settings,
        check_providers,
        check_tools,
        check_mcp_servers,
        check_run_limits,
        check_attachments,
        check_webhooks,
        check_share_links,
        check_trash,
        check_installation,
    ],
)
def test_each_check_is_registered(check: Any) -> None:
    assert check in registry.get_checks()
    # With the app's tag: `manage.py check --tag llm_conversations` selects them.
    assert checks.TAG in check.tags


def test_every_id_in_the_code_has_a_broken_setting_here() -> None:
    # Every module of the checks package, so an id in a module added later counts too.
    parts = [
        importlib.import_module(f"{checks.__name__}.{module.name}")
        for module in pkgutil.iter_modules(checks.__path__)
    ]
    assert len(parts) > 1
    sources = (checks, *parts, provider_registry, mcp_config)
    source = "".join(inspect.getsource(module) for module in sources)
    assert set(ID.findall(source)) == set(BROKEN) | set(BROKEN_PROJECT)


# Django 6.1 runs the model checks against the database (JSONField support).
@pytest.mark.django_db
@pytest.mark.usefixtures("without_sdk")
@pytest.mark.parametrize("check_id", sorted(BROKEN))
def test_run_checks_reports_each_id(check_id: str) -> None:
    value, debug = BROKEN[check_id]
    with override_settings(LLM_CONVERSATIONS=value, DEBUG=debug):
        reported = {message.id for message in run_checks()}
    assert check_id in reported


# Django 6.1 runs the model checks against the database (JSONField support).
@pytest.mark.django_db
@pytest.mark.usefixtures("without_sdk")
@pytest.mark.parametrize("check_id", sorted(BROKEN))
def test_manage_py_check_reports_each_id(check_id: str) -> None:
    value, debug = BROKEN[check_id]
    stderr = io.StringIO()
    with override_settings(LLM_CONVERSATIONS=value, DEBUG=debug):
        if check_id.startswith("llm_conversations.E"):
            with pytest.raises(SystemCheckError, match=re.escape(check_id)):
                call_command("check", stderr=stderr)
        else:
            call_command("check", stderr=stderr)
            assert check_id in stderr.getvalue()


# Django 6.1 runs the model checks against the database (JSONField support).
@pytest.mark.django_db
@pytest.mark.usefixtures("without_celery_app")
@pytest.mark.parametrize("check_id", sorted(BROKEN_PROJECT))
def test_manage_py_check_with_the_apps_tag_reports_each_project_id(check_id: str) -> None:
    with (
        override_settings(**BROKEN_PROJECT[check_id]),
        pytest.raises(SystemCheckError, match=re.escape(check_id)),
    ):
        call_command("check", "--tag", checks.TAG)


@pytest.mark.django_db
@pytest.mark.parametrize("check_id", ["llm_conversations.E003", "llm_conversations.E015"])
def test_manage_py_check_with_the_apps_tag_runs_the_apps_checks(check_id: str) -> None:
    value, debug = BROKEN[check_id]
    with (
        override_settings(LLM_CONVERSATIONS=value, DEBUG=debug),
        pytest.raises(SystemCheckError, match=re.escape(check_id)),
    ):
        call_command("check", "--tag", checks.TAG)


# Django 6.1 runs the model checks against the database (JSONField support).
@pytest.mark.django_db
def test_manage_py_check_is_quiet_for_valid_settings() -> None:
    stderr = io.StringIO()
    with override_settings(LLM_CONVERSATIONS={}, DEBUG=True):
        call_command("check", stderr=stderr)
    assert not ID.findall(stderr.getvalue())


# Settings (E001-E006) -------------------------------------------------------


def setting_ids(value: Any) -> list[str]:
    with override_settings(LLM_CONVERSATIONS=value):
        return [message.id for message in check_settings()]


def test_defaults_pass() -> None:
    assert setting_ids({}) == []


def test_e001_not_a_dict() -> None:
    assert setting_ids(["x"]) == ["llm_conversations.E001"]


def test_e002_unknown_key() -> None:
    assert setting_ids({"MAX_ITERATION": 3}) == ["llm_conversations.E002"]


@pytest.mark.parametrize("value", [0, -1, "8", True, 2.5])
def test_e003_not_a_positive_integer(value: Any) -> None:
    assert setting_ids({"TOOL_WORKERS": value}) == ["llm_conversations.E003"]
    assert setting_ids({"MAX_REPLY_CHARS": value}) == ["llm_conversations.E003"]


def test_e004_default_iterations_above_the_limit() -> None:
    assert setting_ids({"MAX_ITERATIONS": 10, "MAX_ITERATIONS_LIMIT": 5}) == [
        "llm_conversations.E004"
    ]


@pytest.mark.parametrize(
    "key", ["TOOL_TIMEOUT", "RUN_TIMEOUT", "SSE_HEARTBEAT_SECONDS", "RUN_START_WAIT_SECONDS"]
)
@pytest.mark.parametrize("value", [0, -1, "30", True])
def test_e005_not_a_duration(key: str, value: Any) -> None:
    assert setting_ids({key: value}) == ["llm_conversations.E005"]


@pytest.mark.parametrize("value", [None, 0.5, 30])
def test_durations_may_be_none_or_positive(value: Any) -> None:
    assert setting_ids({"TOOL_TIMEOUT": value, "RUN_TIMEOUT": value}) == []


def test_the_heartbeat_is_a_positive_number_never_none() -> None:
    assert setting_ids({"SSE_HEARTBEAT_SECONDS": 0.5}) == []
    assert setting_ids({"SSE_HEARTBEAT_SECONDS": None}) == ["llm_conversations.E005"]


@pytest.mark.parametrize("value", [0, -1, 1.5, "86400", True])
def test_the_idempotency_key_ttl_is_a_positive_integer(value: Any) -> None:
    assert setting_ids({"IDEMPOTENCY_KEY_TTL": value}) == ["llm_conversations.E003"]


@pytest.mark.parametrize("value", [-1, 1.5, "1", True, None])
def test_e006_repairs_not_a_non_negative_integer(value: Any) -> None:
    assert setting_ids({"STRUCTURED_OUTPUT_REPAIRS": value}) == ["llm_conversations.E006"]


@pytest.mark.parametrize("value", [0, 1, 3])
def test_repairs_may_be_zero(value: Any) -> None:
    assert setting_ids({"STRUCTURED_OUTPUT_REPAIRS": value}) == []


@pytest.mark.parametrize("value", [0, -1, 1.5, "30", True])
def test_e007_conversation_retention_is_none_or_a_positive_integer(value: Any) -> None:
    assert setting_ids({"CONVERSATION_RETENTION_DAYS": value}) == ["llm_conversations.E007"]


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_e007_start_concurrency_is_none_or_a_positive_integer(value: Any) -> None:
    assert setting_ids({"RUN_START_CONCURRENCY": value}) == ["llm_conversations.E007"]


@pytest.mark.parametrize(("concurrency", "wait"), [(None, 10), (1, 0.5), (2, 10), (16, 60)])
def test_start_concurrency_may_be_unlimited_or_a_count(concurrency: Any, wait: Any) -> None:
    assert setting_ids({"RUN_START_CONCURRENCY": concurrency, "RUN_START_WAIT_SECONDS": wait}) == []


@pytest.mark.parametrize("value", [None, 1, 365])
def test_conversation_retention_may_be_forever_or_days(value: Any) -> None:
    assert setting_ids({"CONVERSATION_RETENTION_DAYS": value}) == []


@pytest.mark.parametrize("name", ["TELEMETRY_CAPTURE_CONTENT", "STRICT_REQUEST_FIELDS"])
@pytest.mark.parametrize("value", ["false", 0, 1, None])
def test_e008_boolean_settings_are_bools(name: str, value: Any) -> None:
    assert setting_ids({name: value}) == ["llm_conversations.E008"]
    assert setting_ids({name: False}) == []


@pytest.mark.parametrize("value", [True, False])
def test_telemetry_capture_content_may_be_on_or_off(value: Any) -> None:
    assert setting_ids({"TELEMETRY_CAPTURE_CONTENT": value}) == []


# Providers (E010-E019, E040, W010) ------------------------------------------


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
def test_e019_title_provider_not_configured(title: Any) -> None:
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


# Tools (E020-E021) ----------------------------------------------------------


def tools_settings(*paths: Any) -> override_settings:
    return override_settings(LLM_CONVERSATIONS={"TOOLS": list(paths)})


def test_valid_tools_pass() -> None:
    with tools_settings(f"{FIXTURES}.add", f"{FIXTURES}.shout", f"{FIXTURES}.pick_colour"):
        assert check_tools() == []


def test_e020_unimportable_or_not_a_tool() -> None:
    with tools_settings("no_such_module.tool", f"{FIXTURES}.NOT_A_TOOL", f"{FIXTURES}.add", 7):
        messages = check_tools()
    assert [m.id for m in messages] == ["llm_conversations.E020"] * 3
    assert "'no_such_module.tool'" in messages[0].msg
    assert "is a int, not a Tool or a function" in (messages[1].hint or "")
    assert messages[2].msg == "LLM_CONVERSATIONS['TOOLS'] entry 7 is not a dotted path."


def test_e020_tools_not_a_list() -> None:
    with override_settings(LLM_CONVERSATIONS={"TOOLS": f"{FIXTURES}.add"}):
        assert [m.id for m in check_tools()] == ["llm_conversations.E020"]


def test_e021_duplicate_names() -> None:
    with tools_settings(f"{FIXTURES}.add", f"{FIXTURES}.another_add"):
        messages = check_tools()
    assert [m.id for m in messages] == ["llm_conversations.E021"]
    assert messages[0].msg == "LLM_CONVERSATIONS['TOOLS'] has two tools named 'add'."


def defaults_ids(names: Any, **more: Any) -> list[str]:
    config = {"TOOLS": [f"{FIXTURES}.add", f"{FIXTURES}.shout"], "DEFAULT_TOOLS": names, **more}
    with override_settings(LLM_CONVERSATIONS=config):
        return [m.id for m in check_tools()]


@pytest.mark.parametrize("names", ["add", [1], {"add": True}, ("add", None)])
def test_e022_default_tools_none_or_a_list_of_names(names: Any) -> None:
    assert defaults_ids(names) == ["llm_conversations.E022"]


def test_e023_default_tools_names_only_tools() -> None:
    servers = {"MCP_SERVERS": {"files": {"COMMAND": "x"}}}
    assert (
        defaults_ids(["add", "shuot", "files__read", "other__read"], **servers)
        == ["llm_conversations.E023"] * 2
    )
    assert defaults_ids(["files__read"]) == ["llm_conversations.E023"]


@pytest.mark.parametrize("names", [None, [], ["shout"], ("add", "files__read")])
def test_default_tools_may_be_all_none_or_named_tools(names: Any) -> None:
    assert defaults_ids(names, MCP_SERVERS={"files": {"COMMAND": "x"}}) == []


# Run policy and limits (E050-E052) --------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        None,
        "RunPolicy",
        "tests.no_such_module.Policy",
        # Importable, but not a policy class.
        "llm_conversations.runs.policy.check_run",
        "llm_conversations.runs.policy.RunRequest",
    ],
)
def test_e040_run_policy_must_name_a_policy_class(path: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"RUN_POLICY": path}):
        assert [m.id for m in check_run_limits()] == ["llm_conversations.E050"]


def test_e040_accepts_a_policy_subclass() -> None:
    with override_settings(LLM_CONVERSATIONS={"RUN_POLICY": "tests.runs.test_policy.OnlyEcho"}):
        assert check_run_limits() == []


@pytest.mark.parametrize("rate", ["20", "20/", "0/min", "x/min", "20/week", 20, "20/min/x"])
def test_e041_run_rate_must_be_a_drf_rate(rate: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"RUN_RATE": rate}):
        assert [m.id for m in check_run_limits()] == ["llm_conversations.E051"]


@pytest.mark.parametrize("rate", [None, "20/min", "1/s", "100/hour", "5/day"])
def test_e041_accepts_rates_and_none(rate: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"RUN_RATE": rate}):
        assert check_run_limits() == []


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "2"])
def test_e042_max_active_runs_must_be_a_positive_integer(limit: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"MAX_ACTIVE_RUNS_PER_USER": limit}):
        assert [m.id for m in check_run_limits()] == ["llm_conversations.E052"]


@pytest.mark.parametrize("limit", [None, 1, 10])
def test_e042_accepts_none_and_positive_integers(limit: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"MAX_ACTIVE_RUNS_PER_USER": limit}):
        assert check_run_limits() == []


# Budgets (E060, E061) ----------------------------------------------------------


def limit_ids(value: dict[str, Any]) -> list[str]:
    with override_settings(LLM_CONVERSATIONS=value):
        return [message.id for message in check_run_limits()]


@pytest.mark.parametrize(
    "name", ["USER_DAILY_BUDGET", "USER_MONTHLY_BUDGET", "CONVERSATION_BUDGET"]
)
def test_e060_budgets(name: str) -> None:
    assert limit_ids({name: {"tokens": 1000, "cost": "5.00"}}) == []
    assert limit_ids({name: None}) == []
    assert limit_ids({name: {"cost": 5.0}}) == ["llm_conversations.E060"]
    assert limit_ids({name: 1000}) == ["llm_conversations.E060"]


@pytest.mark.parametrize("strategy", ["reject", "enqueue", "interrupt", "rollback"])
def test_e053_busy_strategy_names_one_of_four(strategy: str) -> None:
    assert limit_ids({"BUSY_STRATEGY": strategy}) == []
    assert limit_ids({"BUSY_STRATEGY": strategy.upper()}) == ["llm_conversations.E053"]
    assert limit_ids({"BUSY_STRATEGY": None}) == ["llm_conversations.E053"]


def test_e054_max_waiting_runs() -> None:
    assert limit_ids({"MAX_WAITING_RUNS": None}) == []
    assert limit_ids({"MAX_WAITING_RUNS": 3}) == []
    assert limit_ids({"MAX_WAITING_RUNS": 0}) == ["llm_conversations.E054"]
    assert limit_ids({"MAX_WAITING_RUNS": "3"}) == ["llm_conversations.E054"]


def test_e061_budget_hook() -> None:
    assert limit_ids({"BUDGET_HOOK": "tests.runs.test_budgets.own_limits"}) == []
    assert limit_ids({"BUDGET_HOOK": "own_limits"}) == ["llm_conversations.E061"]
    assert limit_ids({"BUDGET_HOOK": "tests.runs.test_budgets.REPLY"}) == ["llm_conversations.E061"]


@pytest.mark.parametrize("types", ["image/png", {"image/png": 1}, None])
def test_attachment_types_must_be_a_list(types: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"ATTACHMENT_TYPES": types}):
        assert [error.id for error in check_attachments()] == ["llm_conversations.E071"]


def test_the_attachment_defaults_pass() -> None:
    with override_settings(LLM_CONVERSATIONS={"ORPHAN_ATTACHMENT_HOURS": None}):
        assert check_attachments() == []


# Webhooks (E080, E081) --------------------------------------------------------

GOOD_SECRET = "whsec_" + "QUJD" * 8  # 24 bytes


def webhook_errors(value: dict[str, Any]) -> list[str]:
    with override_settings(LLM_CONVERSATIONS=value):
        return [str(message.msg) for message in check_webhooks()]


def test_webhook_endpoints_pass_when_well_formed() -> None:
    hooks = {
        "ops": {"URL": "https://hooks.example.com/in", "SECRET": GOOD_SECRET},
        "failures": {
            "URL": "http://10.0.0.5/hook",
            "SECRET": GOOD_SECRET,
            "EVENTS": ["run.failed", "run.requires_action"],
        },
    }
    assert webhook_errors({"WEBHOOKS": hooks, "WEBHOOK_ALLOWED_HOSTS": ["10.0.0.5"]}) == []
    assert webhook_errors({}) == []


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"URL": "file:///etc/passwd", "SECRET": GOOD_SECRET}, "URL: only http and https"),
        ({"URL": "https://", "SECRET": GOOD_SECRET}, "URL: the URL has no host"),
        ({"URL": "https://x.example", "SECRET": "hunter2-top-secret"}, "SECRET: a signing secret"),
        ({"URL": "https://x.example", "SECRET": "whsec_!!!"}, "SECRET: a signing secret is"),
        ({"URL": "https://x.example", "SECRET": "whsec_QUJD"}, "the base64 of 24 to 62 bytes"),
        (
            {"URL": "https://x.example", "SECRET": GOOD_SECRET, "EVENTS": ["run.done"]},
            "EVENTS: a list of event names",
        ),
        ({"URL": "https://x.example", "SECRET": GOOD_SECRET, "TOKEN": "x"}, "a dict with URL"),
    ],
)
def test_e080_names_the_broken_endpoint_and_never_its_secret(
    entry: dict[str, Any], expected: str
) -> None:
    (error,) = webhook_errors({"WEBHOOKS": {"ops": entry}})
    assert error.startswith("LLM_CONVERSATIONS['WEBHOOKS']['ops']: ")
    assert expected in error
    assert "hunter2" not in error


def test_e080_does_not_quote_a_webhooks_value_that_is_not_a_dict() -> None:
    (error,) = webhook_errors({"WEBHOOKS": [GOOD_SECRET]})
    assert GOOD_SECRET not in error
    assert "must be a dict of endpoints; got list" in error


@pytest.mark.parametrize("hosts", ["127.0.0.1", [""], [1]])
def test_e081_allowed_hosts(hosts: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"WEBHOOK_ALLOWED_HOSTS": hosts}):
        assert [error.id for error in check_webhooks()] == ["llm_conversations.E081"]


# Share links (E090, and E008 for SHARE_LINKS_REQUIRE_LOGIN) ----------------------


@pytest.mark.parametrize("rate", ["60", "0/min", "60/week", 60])
def test_e090_share_rate_must_be_a_drf_rate(rate: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"SHARE_RATE": rate}):
        assert [error.id for error in check_share_links()] == ["llm_conversations.E090"]


@pytest.mark.parametrize("rate", [None, "60/min", "5/s"])
def test_e090_accepts_rates_and_none(rate: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"SHARE_RATE": rate}):
        assert check_share_links() == []


def test_e008_share_links_require_login_must_be_a_bool() -> None:
    with override_settings(LLM_CONVERSATIONS={"SHARE_LINKS_REQUIRE_LOGIN": "yes"}):
        assert [error.id for error in check_settings()] == ["llm_conversations.E008"]
