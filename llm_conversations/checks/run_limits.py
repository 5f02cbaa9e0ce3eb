"""E050-E054, E060, E061: what bounds runs: ``RUN_POLICY``, ``RUN_RATE``, the
active and waiting run limits, ``BUSY_STRATEGY``, and the budgets."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error
from django.utils.module_loading import import_string

from llm_conversations.checks.values import rate_errors, setting_errors
from llm_conversations.conf import BUSY_STRATEGIES, raw_setting
from llm_conversations.core.limits import limit_problems
from llm_conversations.core.settings_rules import is_optional_positive_integer

__all__ = ["POLICY_METHODS", "check_run_limits"]

# What a RUN_POLICY class must have (llm_conversations.runs.policy.RunPolicy).
POLICY_METHODS = ("allowed_providers", "allowed_models", "allowed_tools", "max_iterations")


def check_run_limits(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E050 RUN_POLICY unusable, E051 RUN_RATE not a rate, E052 MAX_ACTIVE_RUNS_PER_USER,
    E053 BUSY_STRATEGY, E054 MAX_WAITING_RUNS, E060 a budget, E061 BUDGET_HOOK."""
    errors: list[CheckMessage] = []
    path = raw_setting("RUN_POLICY")
    problem = _policy_problem(path)
    if problem:
        errors.append(
            Error(
                f"LLM_CONVERSATIONS['RUN_POLICY'] {problem}",
                hint="A dotted path to a class like llm_conversations.runs.policy.RunPolicy.",
                id="llm_conversations.E050",
            )
        )
    errors += rate_errors("RUN_RATE", "llm_conversations.E051")
    errors += setting_errors(
        "MAX_ACTIVE_RUNS_PER_USER",
        is_optional_positive_integer,
        "None or a positive integer",
        "llm_conversations.E052",
    )
    strategy = raw_setting("BUSY_STRATEGY")
    if strategy not in BUSY_STRATEGIES:
        errors.append(
            Error(
                f"LLM_CONVERSATIONS['BUSY_STRATEGY'] must be one of "
                f"{', '.join(BUSY_STRATEGIES)}; got {strategy!r}.",
                id="llm_conversations.E053",
            )
        )
    errors += setting_errors(
        "MAX_WAITING_RUNS",
        is_optional_positive_integer,
        "None or a positive integer",
        "llm_conversations.E054",
    )
    return errors + _budget_errors()


def _budget_errors() -> list[CheckMessage]:
    """E060 a budget setting is not a limit; E061 BUDGET_HOOK is not a callable."""
    errors: list[CheckMessage] = []
    for name in ("USER_DAILY_BUDGET", "USER_MONTHLY_BUDGET", "CONVERSATION_BUDGET"):
        errors.extend(
            Error(
                message,
                hint="None, or {'tokens': 100000} and/or {'cost': '5.00'} (US dollars).",
                id="llm_conversations.E060",
            )
            for message in limit_problems(raw_setting(name), f"LLM_CONVERSATIONS[{name!r}]")
        )
    hook = raw_setting("BUDGET_HOOK")
    if hook is not None:
        problem = None
        try:
            if not isinstance(hook, str) or "." not in hook:
                problem = f"must be None or a dotted path; got {hook!r}."
            elif not callable(import_string(hook)):
                problem = f"{hook!r} is not callable."
        except ImportError as exc:
            problem = f"{hook!r} cannot be imported: {exc}"
        if problem:
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['BUDGET_HOOK'] {problem}",
                    hint="A dotted path to a function taking a user and returning "
                    "{'daily': ..., 'monthly': ..., 'conversation': ...}.",
                    id="llm_conversations.E061",
                )
            )
    return errors


def _policy_problem(path: object) -> str | None:
    if not isinstance(path, str) or "." not in path:
        return f"must be a dotted path; got {path!r}."
    try:
        cls = import_string(path)
    except ImportError as exc:
        return f"{path!r} cannot be imported: {exc}"
    missing = [name for name in POLICY_METHODS if not callable(getattr(cls, name, None))]
    if not isinstance(cls, type) or missing:
        return f"{path!r} is not a policy class (it needs {', '.join(POLICY_METHODS)})."
    return None
