"""Applying budgets: before a run starts and before each of its model calls.

The limits of a conversation's owner come from the settings, or from
``BUDGET_HOOK`` for that user (:func:`limits_for`). What was spent is read
with one aggregate query over stored turns (:func:`spent`): a user's turns
since the start of the UTC day and month, and the conversation's turns. A run
is refused at start when a budget is already spent
(:func:`check_start`), and stopped before a model call whose estimated input
would go past one (:class:`BudgetGuard`). Nothing is queried when no budget
is configured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Q, Sum
from django.utils import timezone
from django.utils.module_loading import import_string

from llm_conversations.conf import conf
from llm_conversations.core.fitting import ContextFitter
from llm_conversations.core.limits import Limits, Spent, limit_problems, parse_limit
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.model_info import COST_PLACES
from llm_conversations.core.tokens import (
    MESSAGE_OVERHEAD,
    REPLY_OVERHEAD,
    heuristic_tokens,
    tools_tokens,
)
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.models import Conversation, ConversationSummary, Message, Run
from llm_conversations.providers.model_catalog import model_info
from llm_conversations.users import User

__all__ = ["BudgetGuard", "budgets_configured", "check_start", "limits_for", "spent"]

_MILLION = Decimal(1_000_000)
_KEYS = ("daily", "monthly", "conversation")


def budgets_configured() -> bool:
    """Whether any budget setting or the hook is set (else nothing is checked)."""
    return any(
        (
            conf.USER_DAILY_BUDGET,
            conf.USER_MONTHLY_BUDGET,
            conf.CONVERSATION_BUDGET,
            conf.BUDGET_HOOK,
        )
    )


def limits_for(user: User | None) -> Limits:
    """The limits of ``user`` (``None``: a conversation without owner): the
    settings, each replaced by the ``BUDGET_HOOK``'s value for a key it returns."""
    values: dict[str, Any] = {
        "daily": conf.USER_DAILY_BUDGET,
        "monthly": conf.USER_MONTHLY_BUDGET,
        "conversation": conf.CONVERSATION_BUDGET,
    }
    if conf.BUDGET_HOOK and user is not None:
        hook: Callable[[User], Mapping[str, Any] | None] = import_string(conf.BUDGET_HOOK)
        own = hook(user) or {}
        for key in set(own) - set(_KEYS):
            raise ImproperlyConfigured(f"BUDGET_HOOK returned an unknown key {key!r}.")
        for key, value in own.items():
            problems = limit_problems(value, f"BUDGET_HOOK(user)[{key!r}]")
            if problems:
                raise ImproperlyConfigured(" ".join(problems))
            values[key] = value
    if user is None:
        values["daily"] = values["monthly"] = None
    return Limits(
        daily=parse_limit(values["daily"]),
        monthly=parse_limit(values["monthly"]),
        conversation=parse_limit(values["conversation"]),
    )


def _since(now: datetime) -> tuple[datetime, datetime]:
    """The starts of the UTC day and month of ``now``."""
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day, day.replace(day=1)


def spent(
    limits: Limits, owner_id: Any, conversation_id: Any, *, now: datetime | None = None
) -> dict[str, Spent]:
    """What the owner spent today and this month (UTC) and what the conversation
    spent, for the limits that apply: assistant turns and the summaries made for
    the ``summarize`` context strategy, one aggregate query each."""
    day, month = _since(now or timezone.now())
    parts: dict[str, Q] = {}
    mine = Q(conversation__owner_id=owner_id)
    if limits.daily is not None and owner_id is not None:
        parts["daily"] = mine & Q(created_at__gte=day)
    if limits.monthly is not None and owner_id is not None:
        parts["monthly"] = mine & Q(created_at__gte=month)
    if limits.conversation is not None:
        parts["conversation"] = Q(conversation_id=conversation_id)
    if not parts:
        return {}
    anywhere = Q()
    for condition in parts.values():
        anywhere |= condition
    sums: dict[str, Any] = {}
    for name, condition in parts.items():
        sums[f"{name}_in"] = Sum("input_tokens", filter=condition)
        sums[f"{name}_out"] = Sum("output_tokens", filter=condition)
        sums[f"{name}_cost"] = Sum("cost", filter=condition)
    # The same fields and conditions on both: a summary is a model call too.
    turns = Message.objects.filter(role="assistant").filter(anywhere).aggregate(**sums)
    summaries = ConversationSummary.objects.filter(anywhere).aggregate(**sums)
    both = (turns, summaries)
    return {
        name: Spent(
            sum((totals[f"{name}_in"] or 0) + (totals[f"{name}_out"] or 0) for totals in both),
            sum((totals[f"{name}_cost"] or Decimal(0) for totals in both), Decimal(0)),
        )
        for name in parts
    }


def check_start(conversation_id: Any) -> None:
    """Refuse a run of a conversation whose owner's or own budget is spent
    (``BudgetExceeded``); two queries, none without budgets."""
    if not budgets_configured():
        return
    owner_id = Conversation.objects.filter(pk=conversation_id).values_list("owner", flat=True)
    owner = _owner(owner_id.first())
    limits = limits_for(owner)
    if not limits.any:
        return
    error = limits.exceeded(spent(limits, _pk(owner), conversation_id), starting=True)
    if error is not None:
        raise error


def _owner(owner_id: Any) -> User | None:
    if owner_id is None:
        return None
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(pk=owner_id)


def _pk(user: User | None) -> Any:
    return None if user is None else user.pk


class BudgetGuard:
    """The budgets of one execution of a run, checked before each model call."""

    def __init__(self, run: Run, limits: Limits, owner_id: Any, model: str) -> None:
        self.run = run
        self.limits = limits
        self.owner_id = owner_id
        info = model_info(run.provider or None, model)
        self.input_price = None if info is None or info.prices is None else info.prices.input
        self._counted = ContextFitter(0)  # only its running sums: no limit applies

    def estimate(
        self, history: Sequence[ChatMessage], tools: Sequence[ToolSpec], instructions: str | None
    ) -> int:
        """Estimated input tokens of a call sending the whole of ``history``
        (counting only what was added since the last estimate)."""
        self._counted.extend(history)
        fixed = REPLY_OVERHEAD + tools_tokens(tools)
        if instructions:
            fixed += MESSAGE_OVERHEAD + heuristic_tokens(instructions)
        return self._counted.sent_tokens(0, fixed)

    @classmethod
    def for_run(cls, run: Run, model: str) -> BudgetGuard | None:
        """The guard of ``run``; ``None`` when no budget applies (nothing is queried then)."""
        if not budgets_configured():
            return None
        owner_id = Conversation.objects.filter(pk=run.conversation_id).values_list(
            "owner", flat=True
        )
        owner = _owner(owner_id.first())
        limits = limits_for(owner)
        return cls(run, limits, _pk(owner), model) if limits.any else None

    def check_spent(self) -> None:
        """Raise ``BudgetExceeded`` when a budget is already reached (before a
        call of another provider, such as a summary); one aggregate query."""
        used = spent(self.limits, self.owner_id, self.run.conversation_id)
        error = self.limits.exceeded(used, starting=True)
        if error is not None:
            raise error

    def check(self, input_tokens: int) -> None:
        """Raise ``BudgetExceeded`` when spending ``input_tokens`` more (at the
        model's input price) would go past a budget; one aggregate query."""
        cost = Decimal(0)
        if self.input_price is not None:
            cost = (input_tokens * self.input_price / _MILLION).quantize(COST_PLACES)
        used = spent(self.limits, self.owner_id, self.run.conversation_id)
        error = self.limits.exceeded(used, Spent(input_tokens, cost))
        if error is not None:
            raise error
