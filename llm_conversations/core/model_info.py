"""What the app knows about a model: its context window, output limit and prices.

A provider entry's ``MODEL_INFO`` maps model names to entries of the shape of
:data:`DEFAULT_MODEL_INFO`; an entry there replaces the shipped default for
that model whole. Prices are US dollars per million tokens, written as strings
(or integers) so they are exact decimals, never binary floats.

Every reader goes through :func:`llm_conversations.providers.model_catalog.model_info`;
:func:`model_info_problems` holds the rules of one ``MODEL_INFO`` value, which the
provider entry check reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from llm_conversations.core.settings_rules import is_positive_integer

__all__ = [
    "COST_DECIMALS",
    "COST_DIGITS",
    "COST_PLACES",
    "DEFAULT_MODEL_INFO",
    "INFO_KEYS",
    "PRICE_KEYS",
    "ModelInfo",
    "Prices",
    "cost_of",
    "cost_shown",
    "cost_text",
    "model_info_problems",
    "parse_model_info",
]

INFO_KEYS = frozenset({"context_window", "max_output_tokens", "prices"})
PRICE_KEYS = frozenset({"input", "cached_input", "cache_write", "output"})
_ANTHROPIC_WRITE = Decimal("1.25")
_ANTHROPIC_MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5")

# Dollars a cost is stored to: a token at the cheapest shipped price costs
# 7.5e-8, so ten places keep every turn's cost exact; twenty digits leave ten
# for whole dollars, more than any sum of turns reaches.
COST_DECIMALS = 10
COST_DIGITS = 20
COST_PLACES = Decimal(1).scaleb(-COST_DECIMALS)
# What the admin shows a cost to: a millionth of a dollar.
SHOWN_PLACES = Decimal("0.000001")

_MILLION = Decimal(1_000_000)

# Taken from the providers' price pages: OpenAI (platform.openai.com/docs/pricing,
# May 2026), Anthropic (docs.anthropic.com/en/docs/about-claude/pricing, March 2026),
# Google (ai.google.dev/gemini-api/docs/pricing, June 2026). Settings override them.
_DEFAULTS = (
    # model, context window, max output tokens, input, cached input, output
    ("gpt-4o", 128_000, 16_384, "2.50", "1.25", "10.00"),
    ("gpt-4o-mini", 128_000, 16_384, "0.15", "0.075", "0.60"),
    ("claude-sonnet-4-5", 200_000, 64_000, "3.00", "0.30", "15.00"),
    ("claude-haiku-4-5", 200_000, 64_000, "1.00", "0.10", "5.00"),
    ("gemini-2.5-flash", 1_048_576, 65_536, "0.30", "0.075", "2.50"),
    ("gemini-2.5-pro", 1_048_576, 65_536, "1.25", "0.125", "10.00"),
    # The models docs/providers.md names, December 2026: gpt-5-mini from its OpenAI
    # model page (developers.openai.com/api/docs/models/gpt-5-mini); gpt-5's input
    # price from OpenAI's model pages (the GPT-5 row of their comparisons), its cached
    # and output prices with simonw/llm-prices (data/openai.json), as OpenAI lists
    # them for the GPT-5 family; gpt-4.1 from github/docs' Copilot price table
    # (data/tables/copilot/models-and-pricing.yml) and simonw/llm-prices, which agree.
    # No DeepSeek model: its prices change with the hour of the day (docs/costs.md).
    ("gpt-5", 400_000, 128_000, "1.25", "0.125", "10.00"),
    ("gpt-5-mini", 400_000, 128_000, "0.25", "0.025", "2.00"),
    ("gpt-4.1", 1_047_576, 32_768, "2.00", "0.50", "8.00"),
)
DEFAULT_MODEL_INFO: dict[str, dict[str, Any]] = {
    model: {
        "context_window": window,
        "max_output_tokens": output_limit,
        "prices": {"input": price_in, "cached_input": price_cached, "output": price_out},
    }
    for model, window, output_limit, price_in, price_cached, price_out in _DEFAULTS
}
# Anthropic bills a 5-minute cache write at 1.25x the input price (its prompt caching
# guide); OpenAI and Gemini cache without a write charge, so their write price is input.
for _prices in (DEFAULT_MODEL_INFO[name]["prices"] for name in _ANTHROPIC_MODELS):
    _prices["cache_write"] = f"{Decimal(_prices['input']) * _ANTHROPIC_WRITE:f}"
"""Model name -> info, in the shape of a ``MODEL_INFO`` setting."""


@dataclass(frozen=True, slots=True)
class Prices:
    """US dollars per million tokens."""

    input: Decimal
    cached_input: Decimal
    """Input tokens read from the provider's prompt cache."""
    output: Decimal
    cache_write: Decimal | None = None
    """Input tokens written to the provider's prompt cache; ``None`` bills them as input."""


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One model's limits and prices; ``None`` where not known."""

    context_window: int | None = None
    max_output_tokens: int | None = None
    prices: Prices | None = None


def cost_of(
    prices: Prices,
    input_tokens: int,
    cached_tokens: int | None,
    output_tokens: int,
    cache_write_tokens: int | None = None,
) -> Decimal:
    """Dollars one call cost, to :data:`COST_PLACES`.

    ``input_tokens`` includes the cache reads and writes (every adapter
    reports it so); reads are billed at ``cached_input``, writes at
    ``cache_write`` (``input`` when it has none), the rest at ``input``.
    """
    cached = min(cached_tokens or 0, input_tokens)
    written = min(cache_write_tokens or 0, input_tokens - cached)
    write_price = prices.input if prices.cache_write is None else prices.cache_write
    total = (
        (input_tokens - cached - written) * prices.input
        + cached * prices.cached_input
        + written * write_price
        + output_tokens * prices.output
    ) / _MILLION
    return total.quantize(COST_PLACES, rounding=ROUND_HALF_UP)


def cost_text(cost: Decimal | None) -> str | None:
    """Dollars as the API and CSV give them: a decimal string with ten places, exact;
    ``None`` if unknown."""
    return None if cost is None else f"{cost.quantize(COST_PLACES):f}"


def cost_shown(cost: Decimal | None) -> str:
    """Dollars for people to read (the admin): rounded to a millionth, trailing zeros
    dropped down to cents (``0.000015``, ``1.20``); ``<0.000001`` for a cost above
    zero but below that; ``-`` if unknown. :func:`cost_text` is the exact form."""
    if cost is None:
        return "-"
    if 0 < cost < SHOWN_PLACES:
        return f"<{SHOWN_PLACES:f}"
    whole, _, places = f"{cost.quantize(SHOWN_PLACES, ROUND_HALF_UP):f}".partition(".")
    return f"{whole}.{places.rstrip('0').ljust(2, '0')}"


def _price(value: object) -> Decimal | None:
    """A non-negative finite decimal, or ``None``; floats are refused as inexact."""
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        return None
    try:
        price = Decimal(value)
    except InvalidOperation:
        return None
    return price if price.is_finite() and price >= 0 else None


def model_info_problems(value: object, where: str) -> list[str]:
    """Every problem of one ``MODEL_INFO`` value, each a sentence naming ``where``."""
    if not isinstance(value, Mapping):
        return [f"{where}['MODEL_INFO'] must be a dict of model name -> model info."]
    problems: list[str] = []
    for model, info in value.items():
        at = f"{where}['MODEL_INFO'][{model!r}]"
        if not isinstance(model, str) or not model:
            problems.append(f"{at}: a model name must be a non-empty string.")
        if not isinstance(info, Mapping):
            problems.append(f"{at} must be a dict.")
            continue
        for key in sorted(set(info) - INFO_KEYS, key=str):
            problems.append(f"{at} has an unknown key {key!r}.")
        for key in ("context_window", "max_output_tokens"):
            if key in info and not is_positive_integer(info[key]):
                problems.append(f"{at}[{key!r}] must be a positive integer; got {info[key]!r}.")
        if "prices" in info:
            problems.extend(_price_problems(info["prices"], f"{at}['prices']"))
    return problems


def _price_problems(prices: object, at: str) -> list[str]:
    if not isinstance(prices, Mapping):
        return [f"{at} must be a dict with 'input' and 'output' (and 'cached_input')."]
    problems = [f"{at} has an unknown key {key!r}." for key in sorted(set(prices) - PRICE_KEYS)]
    for key in ("input", "output"):
        if key not in prices:
            problems.append(f"{at} needs {key!r}.")
    for key in sorted(PRICE_KEYS & set(prices)):
        if _price(prices[key]) is None:
            problems.append(
                f"{at}[{key!r}] must be a non-negative decimal in a string, "
                f"e.g. '2.50'; got {prices[key]!r}."
            )
    return problems


def parse_model_info(info: Mapping[str, Any]) -> ModelInfo:
    """A :class:`ModelInfo` from one valid entry (see :func:`model_info_problems`).

    ``cached_input`` defaults to ``input`` where a provider has no cache price;
    without ``cache_write`` cache writes are billed as input.
    """
    raw = info.get("prices")
    prices = None
    if isinstance(raw, Mapping):
        prices = Prices(
            input=Decimal(raw["input"]),
            cached_input=Decimal(raw.get("cached_input", raw["input"])),
            output=Decimal(raw["output"]),
            cache_write=Decimal(raw["cache_write"]) if "cache_write" in raw else None,
        )
    return ModelInfo(
        context_window=info.get("context_window"),
        max_output_tokens=info.get("max_output_tokens"),
        prices=prices,
    )
