"""An attempt's worst case (router/reservations.py): what it reserves against the budgets that
cover it, and the starts no budget can hold, refused with the budget and the fix."""

from __future__ import annotations

import pytest

from jobrouter.budgets import period_at
from jobrouter.config_budgets import BudgetConfig
from jobrouter.errors import BudgetUnheld
from jobrouter.providers.pricing import Price, Tier, UnknownPrice
from jobrouter.reservations import worst_case, worst_usd
from jobrouter.store.spend import Hold, Reservation

NOW = 1_764_763_200.0  # 2025-12-03 12:00 UTC
DAY = 1_764_720_000.0  # its 00:00 UTC
MONTH = 1_764_547_200.0  # 2025-12-01 00:00 UTC
PRICE = Price(1e-6, 4e-6, "config")  # $1 in, $4 out per million
BUDGETS = {
    "shop_usd": BudgetConfig(owner="shop-1", period="day", usd=5.0),
    "all_tokens": BudgetConfig(period="month", tokens=1000),
    "rolling": BudgetConfig(period="rolling", window=3600, usd=1.0),
}


def test_the_worst_case_is_the_prompt_bytes_plus_max_tokens_at_the_price() -> None:
    """Mutants killed: the prompt's bytes left out of the tokens, max_tokens priced at the
    input rate, a hold's period not the budget's own (day vs month)."""
    reserved = worst_case(
        BUDGETS, ["all_tokens", "shop_usd"], PRICE, prompt_bytes=300, max_tokens=100, now=NOW
    )
    assert reserved == Reservation(
        (Hold("all_tokens", MONTH, None, 1000), Hold("shop_usd", DAY, 5.0, None)),
        pytest.approx(300e-6 + 400e-6),
        400,
    )


def test_no_covering_budget_reserves_nothing() -> None:
    assert (
        worst_case(BUDGETS, [], UnknownPrice("x"), prompt_bytes=1, max_tokens=None, now=NOW) is None
    )


def test_a_start_without_max_tokens_cannot_be_held() -> None:
    """Mutant killed: the max_tokens check removed (a TypeError, or a reservation without the
    completion)."""
    with pytest.raises(BudgetUnheld, match="max_tokens") as refused:
        worst_case(BUDGETS, ["all_tokens"], PRICE, prompt_bytes=10, max_tokens=None, now=NOW)
    assert refused.value.budget == "all_tokens" and "sampling.max_tokens" in refused.value.hint


def test_an_unknown_price_cannot_hold_a_usd_budget_but_can_a_token_one() -> None:
    """Mutants killed: the unknown-price check removed (a USD cap charged $0), the check
    applied to token-only budgets too."""
    unknown = UnknownPrice("no price for model m")
    with pytest.raises(BudgetUnheld, match="no price for model m") as refused:
        worst_case(BUDGETS, ["shop_usd"], unknown, prompt_bytes=10, max_tokens=5, now=NOW)
    assert refused.value.budget == "shop_usd" and "providers.NAME.price" in refused.value.hint
    tokens_only = worst_case(
        BUDGETS, ["all_tokens"], unknown, prompt_bytes=10, max_tokens=5, now=NOW
    )
    assert tokens_only is not None and (tokens_only.usd, tokens_only.tokens) == (0.0, 15)


def test_a_rolling_budget_holds_the_bucket_of_now_against_its_window() -> None:
    """Mutant seen failing: the hold's window_from left out (the bucket alone would be held
    against the cap, as if it were a calendar period)."""
    reserved = worst_case(BUDGETS, ["rolling"], PRICE, prompt_bytes=10, max_tokens=5, now=NOW)
    span = period_at(BUDGETS["rolling"], NOW)
    assert reserved is not None
    assert reserved.holds == (Hold("rolling", span.row, 1.0, None, span.start),)
    assert span.start < span.row


def test_a_tier_the_bound_prompt_reaches_prices_the_worst_case() -> None:
    """The bound (bytes) may reach a tier the real prompt does not: the higher rate is the
    bound. A tier cheaper than the base never lowers it. Mutants killed: the tier's rates
    ignored; `min` for `max`."""
    tiered = Price(1e-6, 2e-6, "litellm_map", (Tier(100, 3e-6, 5e-6),))
    assert worst_usd(tiered, 101, 10) == pytest.approx(101 * 3e-6 + 10 * 5e-6)
    assert worst_usd(tiered, 100, 10) == pytest.approx(100 * 1e-6 + 10 * 2e-6)
    cheaper = Price(1e-6, 2e-6, "litellm_map", (Tier(100, 0.5e-6, 1e-6),))
    assert worst_usd(cheaper, 101, 10) == pytest.approx(101 * 1e-6 + 10 * 2e-6)
