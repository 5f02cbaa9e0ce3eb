"""``{% load llm_conversations_admin %}``: the admin templates' filters."""

from __future__ import annotations

from decimal import Decimal

from django import template

from llm_conversations.core.model_info import cost_shown

__all__ = ["cost"]

register = template.Library()


@register.filter
def cost(value: Decimal | None) -> str:
    """A cost in dollars as the admin shows it (:func:`~llm_conversations.core.model_info.cost_shown`)."""
    return cost_shown(value)
