"""``checks/run_limits.py``: E050-E054, E060, E061: the run policy, rates, limits, the busy
strategy and budgets."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from llm_conversations.checks import check_run_limits


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
def test_e050_run_policy_must_name_a_policy_class(path: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"RUN_POLICY": path}):
        assert [m.id for m in check_run_limits()] == ["llm_conversations.E050"]


def test_e050_accepts_a_policy_subclass() -> None:
    with override_settings(LLM_CONVERSATIONS={"RUN_POLICY": "tests.runs.test_policy.OnlyEcho"}):
        assert check_run_limits() == []


@pytest.mark.parametrize("rate", ["20", "20/", "0/min", "x/min", "20/week", 20, "20/min/x"])
def test_e051_run_rate_must_be_a_drf_rate(rate: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"RUN_RATE": rate}):
        assert [m.id for m in check_run_limits()] == ["llm_conversations.E051"]


@pytest.mark.parametrize("rate", [None, "20/min", "1/s", "100/hour", "5/day"])
def test_e051_accepts_rates_and_none(rate: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"RUN_RATE": rate}):
        assert check_run_limits() == []


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "2"])
def test_e052_max_active_runs_must_be_a_positive_integer(limit: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"MAX_ACTIVE_RUNS_PER_USER": limit}):
        assert [m.id for m in check_run_limits()] == ["llm_conversations.E052"]


@pytest.mark.parametrize("limit", [None, 1, 10])
def test_e052_accepts_none_and_positive_integers(limit: Any) -> None:
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
