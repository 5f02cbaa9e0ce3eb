"""System checks for LLM_CONVERSATIONS, one test per id."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from llm_conversations.checks import check_settings


def ids(value: Any) -> list[str]:
    with override_settings(LLM_CONVERSATIONS=value):
        return [message.id for message in check_settings()]


def test_defaults_pass() -> None:
    assert ids({}) == []


def test_e001_not_a_dict() -> None:
    assert ids(["x"]) == ["llm_conversations.E001"]


def test_e002_unknown_key() -> None:
    assert ids({"MAX_ITERATION": 3}) == ["llm_conversations.E002"]


@pytest.mark.parametrize("value", [0, -1, "8", True, 2.5])
def test_e003_not_a_positive_integer(value: Any) -> None:
    assert ids({"TOOL_WORKERS": value}) == ["llm_conversations.E003"]


def test_e004_default_iterations_above_the_limit() -> None:
    assert ids({"MAX_ITERATIONS": 10, "MAX_ITERATIONS_LIMIT": 5}) == ["llm_conversations.E004"]
