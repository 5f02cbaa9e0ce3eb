"""``checks/settings_values.py``: E001-E008, the kinds of value of the plain settings."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from llm_conversations.checks import check_settings


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
@pytest.mark.parametrize("value", [0, -1, "30", True, float("inf"), float("nan")])
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


@pytest.mark.parametrize("value", [0, -1, 1.5, "100", True])
def test_e007_start_queue_is_none_or_a_positive_integer(value: Any) -> None:
    assert setting_ids({"RUN_START_QUEUE": value}) == ["llm_conversations.E007"]


@pytest.mark.parametrize("value", [None, 1, 1000])
def test_start_queue_may_be_unlimited_or_a_count(value: Any) -> None:
    assert setting_ids({"RUN_START_QUEUE": value}) == []


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


def test_e008_share_links_require_login_must_be_a_bool() -> None:
    with override_settings(LLM_CONVERSATIONS={"SHARE_LINKS_REQUIRE_LOGIN": "yes"}):
        assert [error.id for error in check_settings()] == ["llm_conversations.E008"]
