"""Model metadata: shipped defaults, settings that override them, and costs from prices."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import override_settings

from llm_conversations.core.model_info import (
    DEFAULT_MODEL_INFO,
    ModelInfo,
    Prices,
    cost_of,
    cost_shown,
    model_info_problems,
)
from llm_conversations.providers.model_catalog import model_info

PRICES = Prices(input=Decimal("2.50"), cached_input=Decimal("1.25"), output=Decimal("10.00"))


def providers(**model_info: object) -> dict[str, object]:
    return {
        "PROVIDERS": {
            "default": {"BACKEND": "echo", "MODEL": "echo"},
            "other": {"BACKEND": "echo", "MODEL": "echo", "MODEL_INFO": model_info},
        }
    }


def test_every_default_is_valid_and_priced() -> None:
    assert model_info_problems(DEFAULT_MODEL_INFO, "DEFAULT_MODEL_INFO") == []
    for name in DEFAULT_MODEL_INFO:
        info = model_info(None, name)
        assert info is not None
        assert info.prices is not None
        assert info.context_window
        assert info.prices.cached_input <= info.prices.input < info.prices.output


def test_a_default_is_read_as_exact_decimals() -> None:
    assert model_info(None, "gpt-4o") == ModelInfo(
        context_window=128_000, max_output_tokens=16_384, prices=PRICES
    )


def test_an_unknown_model_has_no_info() -> None:
    assert model_info(None, "echo") is None


@override_settings(LLM_CONVERSATIONS=providers(**{"gpt-4o": {"context_window": 64_000}}))
def test_the_entry_replaces_the_default_whole_for_its_provider_only() -> None:
    assert model_info("other", "gpt-4o") == ModelInfo(context_window=64_000)
    assert model_info("default", "gpt-4o") == model_info(None, "gpt-4o")
    assert model_info("default", "gpt-4o") != ModelInfo(context_window=64_000)


@override_settings(LLM_CONVERSATIONS=providers(local={"prices": {"input": "0.1", "output": "0.4"}}))
def test_cached_input_defaults_to_the_input_price() -> None:
    info = model_info("other", "local")
    assert info is not None
    assert info.prices == Prices(
        input=Decimal("0.1"), cached_input=Decimal("0.1"), output=Decimal("0.4")
    )


@override_settings(LLM_CONVERSATIONS=providers(local={"prices": {"input": 0.1, "output": "1"}}))
def test_an_invalid_entry_gives_no_info_rather_than_a_wrong_price() -> None:
    assert model_info("other", "local") is None


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ((1_000_000, None, 1_000_000), Decimal("12.5")),
        ((1_000_000, 400_000, 0), Decimal("2.0")),
        ((1, 0, 0), Decimal("0.0000025")),
        ((0, 0, 0), Decimal("0")),
        # More cached than input (a provider's rounding) bills no negative input.
        ((10, 20, 0), Decimal("0.0000125")),
    ],
)
def test_cost_bills_cached_input_at_its_own_price(
    usage: tuple[int, int | None, int], expected: Decimal
) -> None:
    assert cost_of(PRICES, *usage) == expected


def test_cost_is_rounded_to_ten_places() -> None:
    tiny = Prices(input=Decimal("0.075"), cached_input=Decimal("0.0001"), output=Decimal("1"))
    assert cost_of(tiny, 1, 1, 0) == Decimal("0.0000000001")
    assert cost_of(tiny, 3, 0, 0) == Decimal("0.0000002250")


def test_cost_bills_cache_writes_at_the_write_price() -> None:
    claude = model_info(None, "claude-sonnet-4-5")
    assert claude is not None
    assert claude.prices is not None
    assert claude.prices.cache_write == Decimal("3.75")  # 1.25x the input price
    # 1M input: 200k read, 300k written, 500k plain; no output.
    assert cost_of(claude.prices, 1_000_000, 200_000, 0, 300_000) == Decimal("2.685")
    # Without a write price (OpenAI, Gemini) writes are plain input.
    assert cost_of(PRICES, 1_000_000, 0, 0, 300_000) == cost_of(PRICES, 1_000_000, 0, 0)
    # Writes never bill more input than there is.
    assert cost_of(claude.prices, 10, 10, 0, 5) == cost_of(claude.prices, 10, 10, 0)


@override_settings(
    LLM_CONVERSATIONS=providers(local={"prices": {"input": "1", "cache_write": "2", "output": "3"}})
)
def test_a_cache_write_price_may_be_configured() -> None:
    info = model_info("other", "local")
    assert info is not None
    assert info.prices is not None
    assert info.prices.cache_write == Decimal("2")


@pytest.mark.parametrize(
    ("cost", "shown"),
    [
        (None, "-"),
        (Decimal(0), "0.00"),
        (Decimal("0.0200000000"), "0.02"),
        (Decimal("1.2000000000"), "1.20"),
        (Decimal("0.0000150000"), "0.000015"),
        (Decimal("0.0000004000"), "<0.000001"),
        (Decimal("0.0000015000"), "0.000002"),
        (Decimal("12345.6789012345"), "12345.678901"),
    ],
)
def test_a_cost_is_shown_to_a_millionth_of_a_dollar(cost: Decimal | None, shown: str) -> None:
    assert cost_shown(cost) == shown
