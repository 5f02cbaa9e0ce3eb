"""What conversations and users have cost: aggregate queries over stored turn costs.

A turn's cost is fixed when it is stored (``Message.cost``, from the prices in
force then) and a run's is the sum of its turns (``Run.cost``, counted by
``runs/transitions.store_reply``); these read sums, and never re-price.
:func:`run_cost` keeps a run whose calls cost nothing known unknown.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import DecimalField, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from llm_conversations.core.model_info import COST_DECIMALS, COST_DIGITS
from llm_conversations.models import Conversation, Message, Run
from llm_conversations.providers.model_catalog import model_info
from llm_conversations.users import User

__all__ = ["conversation_cost", "run_cost", "user_cost", "with_cost"]

_COST = DecimalField(max_digits=COST_DIGITS, decimal_places=COST_DECIMALS)


def _total() -> Any:
    """``Sum("cost")``, zero rather than ``NULL`` when no turn is priced."""
    return Coalesce(Sum("cost"), Value(Decimal(0)), output_field=_COST)


def with_cost(conversations: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """``conversations`` annotated with ``cost``: the sum of their turns' costs.

    One correlated subquery in the same statement as the page, whatever its size.
    """
    per_conversation = (
        Message.objects.filter(conversation_id=OuterRef("pk"))
        .order_by()
        .values("conversation_id")
        .annotate(total=Sum("cost"))
        .values("total")
    )
    return conversations.annotate(
        cost=Coalesce(Subquery(per_conversation), Value(Decimal(0)), output_field=_COST)
    )


def conversation_cost(conversation: Conversation | Any) -> Decimal:
    """The dollars one conversation's turns cost (one aggregate query)."""
    pk = conversation.pk if isinstance(conversation, Conversation) else conversation
    result: Decimal = Message.objects.filter(conversation_id=pk).aggregate(total=_total())["total"]
    return result


def user_cost(user: User, *, since: datetime | None = None) -> Decimal:
    """The dollars the turns of ``user``'s conversations cost, since ``since`` if given
    (one aggregate query)."""
    messages = Message.objects.filter(conversation__owner=user)
    if since is not None:
        messages = messages.filter(created_at__gte=since)
    result: Decimal = messages.aggregate(total=_total())["total"]
    return result


def run_cost(run: Run) -> Decimal | None:
    """What ``run``'s model calls cost: its stored sum (``Run.cost``), or ``None``
    when nothing they cost is known, as for its turns (``Message.cost``).

    The sum counts an unpriced call as nothing, so a sum of zero after calls is
    unknown unless the entry that answered prices the run's model (a price of
    zero, or calls without tokens). No query: the run and the settings say it.
    """
    if run.cost or not run.iterations:
        return run.cost
    info = model_info(run.answered_by or run.provider or None, run.model)
    return run.cost if info is not None and info.prices is not None else None
