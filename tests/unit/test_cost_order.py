"""`order = "cost"` as data: a task's providers cheapest first by their comparable price (a
million tokens in and out at the dearest tier), an unknown price last, equal prices as listed."""

from __future__ import annotations

from jobrouter.policy import by_price
from jobrouter.providers.pricing import Price, Tier, UnknownPrice
from jobrouter.reservations import comparable_price


def test_cheapest_first_and_an_unknown_price_last() -> None:
    """Mutants seen failing: the key reversed (dearest first); an unknown price sorted as 0
    (first) instead of last."""
    prices = {"dear": 9.0, "unpriced": None, "cheap": 1.0, "middle": 4.0}
    assert by_price(["dear", "unpriced", "cheap", "middle"], prices) == (
        "cheap",
        "middle",
        "dear",
        "unpriced",
    )


def test_equal_prices_keep_the_configured_order() -> None:
    """Stable among equals, unknown ones too. Mutant seen failing: ties broken by name."""
    prices = {"b": 2.0, "a": 2.0, "d": None, "c": None, "e": 1.0}
    assert by_price(["b", "a", "d", "c", "e"], prices) == ("e", "b", "a", "d", "c")


def test_a_prompt_size_tier_ranks_a_provider_at_its_dearest_rates() -> None:
    """Cheap below 200k prompt tokens, dear above: ranked at the dear rates, so it is never
    cheaper than it is ranked. Mutant seen failing: the tiers ignored (base rates only)."""
    flat = Price(3e-6, 3e-6, "config")
    tiered = Price(1e-6, 1e-6, "litellm_map", tiers=(Tier(200_000, 5e-6, 5e-6),))
    assert comparable_price(flat) == 6.0
    assert comparable_price(tiered) == 10.0
    assert comparable_price(UnknownPrice("no price")) is None
