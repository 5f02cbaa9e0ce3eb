"""Budgets: how many tokens, or dollars, a user or a conversation may spend.

A limit (:class:`Limit`) caps tokens, dollars or both; :class:`Limits` holds a
user's daily and monthly limits and a conversation's lifetime limit. The
settings give everyone's (``USER_DAILY_BUDGET``, ``USER_MONTHLY_BUDGET``,
``CONVERSATION_BUDGET``); a ``BUDGET_HOOK`` may give each user their own.
:func:`limit_problems` holds the rules of one limit value, which the system
check (E060) and the hook's results share; :meth:`Limits.exceeded` judges what
was spent plus what the next call adds. Pure: imports nothing from Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from llm_conversations.exceptions import BudgetExceeded

__all__ = ["LIMIT_KEYS", "Limit", "Limits", "Spent", "limit_problems", "parse_limit"]

LIMIT_KEYS = frozenset({"tokens", "cost"})


@dataclass(frozen=True, slots=True)
class Limit:
    """At most ``tokens`` tokens (input and output) and ``cost`` US dollars; ``None``: no cap."""

    tokens: int | None = None
    cost: Decimal | None = None


@dataclass(frozen=True, slots=True)
class Spent:
    """Tokens (input and output) and dollars spent."""

    tokens: int = 0
    cost: Decimal = Decimal(0)

    def __add__(self, other: Spent) -> Spent:
        return Spent(self.tokens + other.tokens, self.cost + other.cost)


def limit_problems(value: object, where: str) -> list[str]:
    """Every problem of one limit value (``None`` or ``{"tokens": int, "cost": "1.50"}``)."""
    if value is None:
        return []
    if not isinstance(value, Mapping) or not value:
        return [f"{where} must be None or a dict with 'tokens' and/or 'cost'; got {value!r}."]
    problems = [f"{where} has an unknown key {key!r}." for key in sorted(set(value) - LIMIT_KEYS)]
    tokens = value.get("tokens")
    if "tokens" in value and (
        isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0
    ):
        problems.append(f"{where}['tokens'] must be a non-negative integer; got {tokens!r}.")
    if "cost" in value and _dollars(value["cost"]) is None:
        problems.append(
            f"{where}['cost'] must be a non-negative decimal in a string, e.g. '5.00'; "
            f"got {value['cost']!r}."
        )
    return problems


def _dollars(value: object) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        return None  # floats are refused: binary fractions do not add up to the cent
    try:
        dollars = Decimal(value)
    except InvalidOperation:
        return None
    return dollars if dollars.is_finite() and dollars >= 0 else None


def parse_limit(value: object) -> Limit | None:
    """A :class:`Limit` from a valid value (see :func:`limit_problems`); ``None`` for none."""
    if not isinstance(value, Mapping) or limit_problems(value, "limit"):
        return None
    tokens = value.get("tokens")
    cost = _dollars(value["cost"]) if "cost" in value else None
    return Limit(tokens=tokens, cost=cost)


_NAMES = {"daily": "daily", "monthly": "monthly", "conversation": "conversation's"}


@dataclass(frozen=True, slots=True)
class Limits:
    """A user's daily and monthly limits and the conversation's, each optional."""

    daily: Limit | None = None
    monthly: Limit | None = None
    conversation: Limit | None = None

    @property
    def any(self) -> bool:
        """Whether any limit applies."""
        return any((self.daily, self.monthly, self.conversation))

    def exceeded(
        self, spent: Mapping[str, Spent], next_call: Spent = Spent(), *, starting: bool = False
    ) -> BudgetExceeded | None:
        """The error for the first limit ``spent`` (by ``daily``, ``monthly``,
        ``conversation``) plus ``next_call`` goes past, or ``None``.

        With ``starting``, a limit already reached counts (a run is not
        started on a spent budget); otherwise only going past it does.
        """
        for name in ("daily", "monthly", "conversation"):
            limit: Limit | None = getattr(self, name)
            if limit is None:
                continue
            used = spent.get(name, Spent())
            total = used + next_call
            label = _NAMES[name]
            if limit.tokens is not None and (
                total.tokens > limit.tokens or (starting and used.tokens >= limit.tokens)
            ):
                return BudgetExceeded(
                    f"the {label} budget of {limit.tokens} tokens would be exceeded "
                    f"({used.tokens} spent, about {next_call.tokens} more for the next call).",
                )
            if limit.cost is not None and (
                total.cost > limit.cost or (starting and used.cost >= limit.cost)
            ):
                return BudgetExceeded(
                    f"the {label} budget of {limit.cost} USD would be exceeded "
                    f"({used.cost.normalize():f} USD spent).",
                )
        return None
