"""The models each provider entry serves: what is known of them, and what a call cost.

The one reader of a ``PROVIDERS`` entry's ``MODEL_INFO`` (over the shipped
:data:`~llm_conversations.core.model_info.DEFAULT_MODEL_INFO`).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from llm_conversations.conf import conf
from llm_conversations.core.completions import Usage
from llm_conversations.core.model_info import (
    DEFAULT_MODEL_INFO,
    ModelInfo,
    cost_of,
    model_info_problems,
    parse_model_info,
)

__all__ = ["call_cost", "model_info"]


def model_info(provider: str | None, model: str) -> ModelInfo | None:
    """What is known of ``model`` as served by the ``PROVIDERS`` entry ``provider``.

    The entry's ``MODEL_INFO`` first, then :data:`DEFAULT_MODEL_INFO`; ``None``
    for a model in neither, or an entry the system check reports as invalid.
    """
    entry = conf.PROVIDERS.get(provider if provider is not None else conf.DEFAULT_PROVIDER)
    configured = entry.get("MODEL_INFO") if isinstance(entry, Mapping) else None
    if isinstance(configured, Mapping) and model in configured:
        if model_info_problems({model: configured[model]}, "MODEL_INFO"):
            return None
        return parse_model_info(configured[model])
    default = DEFAULT_MODEL_INFO.get(model)
    return None if default is None else parse_model_info(default)


def call_cost(provider: str | None, model: str, usage: Usage) -> Decimal | None:
    """Dollars a call to ``model`` through the entry ``provider`` cost, at the
    prices in force now; ``None`` for a model without prices."""
    info = model_info(provider, model)
    if info is None or info.prices is None:
        return None
    return cost_of(
        info.prices,
        usage.input_tokens,
        usage.cached_tokens,
        usage.output_tokens,
        usage.cache_write_tokens,
    )
