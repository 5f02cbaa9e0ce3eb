"""The kinds of value a setting may hold, and a settings entry's problems."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest

from llm_conversations.core.settings_rules import (
    EntryProblem,
    is_finite_non_negative_number,
    is_finite_positive_number,
    is_non_negative_integer,
    is_optional_finite_positive_number,
    is_optional_positive_integer,
    is_positive_integer,
    unknown_key_problems,
)

INF = float("inf")
NAN = float("nan")
HUGE = 10**400  # too large for a float: still a finite integer

# value -> whether each predicate accepts it, in the order of PREDICATES.
PREDICATES: tuple[Callable[[object], bool], ...] = (
    is_positive_integer,
    is_non_negative_integer,
    is_optional_positive_integer,
    is_finite_positive_number,
    is_finite_non_negative_number,
    is_optional_finite_positive_number,
)
CASES: list[tuple[object, tuple[bool, ...]]] = [
    (1, (True, True, True, True, True, True)),
    (HUGE, (True, True, True, True, True, True)),
    (0, (False, True, False, False, True, False)),
    (-1, (False, False, False, False, False, False)),
    (0.5, (False, False, False, True, True, True)),
    (0.0, (False, False, False, False, True, False)),
    (-0.5, (False, False, False, False, False, False)),
    (None, (False, False, True, False, False, True)),
    # bool is an int subclass; True is a mistake, not 1.
    (True, (False, False, False, False, False, False)),
    (False, (False, False, False, False, False, False)),
    # Infinity and NaN are no number of seconds: each overflows a clock or a wait.
    (INF, (False, False, False, False, False, False)),
    (-INF, (False, False, False, False, False, False)),
    (NAN, (False, False, False, False, False, False)),
    ("1", (False, False, False, False, False, False)),
    (Decimal("1"), (False, False, False, False, False, False)),
]


@pytest.mark.parametrize(("value", "accepted"), CASES, ids=lambda case: repr(case))
def test_each_kind_accepts_only_its_values(value: object, accepted: tuple[bool, ...]) -> None:
    got = tuple(predicate(value) for predicate in PREDICATES)
    assert got == accepted


@pytest.mark.parametrize(
    ("check_id", "is_error"),
    [
        ("llm_conversations.E011", True),
        ("llm_conversations.W010", False),
    ],
)
def test_an_entry_problem_is_an_error_by_its_id(check_id: str, is_error: bool) -> None:
    problem = EntryProblem(check_id, "A provider entry must be a dict.")
    assert problem.is_error is is_error
    assert problem.hint is None


def test_unknown_keys_are_one_problem_each_in_key_order() -> None:
    entry = {"MODEL": "m", "ZETA": 1, 3: "x", "ALPHA": 2}
    problems = unknown_key_problems(entry, frozenset({"MODEL", "BACKEND"}), "An entry", "app.E016")
    assert [p.message for p in problems] == [
        "An entry has an unknown key 3.",
        "An entry has an unknown key 'ALPHA'.",
        "An entry has an unknown key 'ZETA'.",
    ]
    assert {p.hint for p in problems} == {"Known keys: BACKEND, MODEL."}
    assert {p.id for p in problems} == {"app.E016"}
    assert unknown_key_problems({"MODEL": "m"}, frozenset({"MODEL"}), "An entry", "app.E016") == []
