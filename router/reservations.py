"""An attempt's worst case, reserved against the budgets that cover it before its provider is
called (docs/spend.md). A pure function of the configured budgets, the provider's price, the
request's size and a clock: the store charges what it returns (`Reservation`) in the
transaction that writes the attempt row.

The worst case counts the prompt as its UTF-8 byte count (of the messages as JSON, so the
roles and the framing are in it too): a byte-level BPE tokenizer (OpenAI's, Llama 3's) never
makes more tokens than bytes, so the bytes bound the prompt tokens from above without loading
a tokenizer per model. The completion is `max_tokens`, the most a provider may write. The
price is the highest input and output rate of any tier the bound prompt could fall in, so a
prompt-size tier can never make the actual cost exceed the reservation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jobrouter.budgets import period_at
from jobrouter.config_budgets import BudgetConfig
from jobrouter.errors import BudgetUnheld
from jobrouter.providers.pricing import PER_MILLION, Price, Pricing, UnknownPrice
from jobrouter.store.spend import Hold, Reservation

NO_MAX_TOKENS = (
    "the attempt has no max_tokens, so its completion (and its cost) has no upper bound",
    "set the contract's sampling.max_tokens or send params.max_tokens",
)


def worst_case(
    budgets: Mapping[str, BudgetConfig],
    names: Sequence[str],
    pricing: Pricing,
    *,
    prompt_bytes: int,
    max_tokens: int | None,
    now: float,
) -> Reservation | None:
    """What an attempt covered by the budgets `names` (`jobrouter.budgets.covering`) must
    reserve: None when no budget covers it. BudgetUnheld when a covering budget cannot be
    held: no `max_tokens`, or a USD cap and an unknown price (the start is refused, never
    let through uncharged)."""
    if not names:
        return None
    if max_tokens is None:
        raise BudgetUnheld(budget=names[0], reason=NO_MAX_TOKENS[0], hint=NO_MAX_TOKENS[1])
    usd = 0.0
    if isinstance(pricing, UnknownPrice):
        priced = [name for name in names if budgets[name].usd is not None]
        if priced:
            raise BudgetUnheld(
                budget=priced[0],
                reason=f"its cap is in USD and the provider's price is unknown ({pricing.reason})",
                hint="set [providers.NAME.price] input_usd_per_million and output_usd_per_million",
            )
    else:
        usd = worst_usd(pricing, prompt_bytes, max_tokens)
    holds = tuple(_hold(name, budgets[name], now) for name in names)
    return Reservation(holds, usd, prompt_bytes + max_tokens)


def _hold(name: str, budget: BudgetConfig, now: float) -> Hold:
    """What a charge of `budget` at `now` is held against: its calendar period's row, or its
    rolling window's bucket of `now`, checked against the window's buckets."""
    span = period_at(budget, now)
    window_from = None if span.bucket is None else span.start
    return Hold(name, span.row, budget.usd, budget.tokens, window_from)


def worst_usd(price: Price, prompt_tokens: int, completion_tokens: int) -> float:
    """The most a call of at most `prompt_tokens` in and `completion_tokens` out can cost:
    each side at the highest rate of the tiers such a prompt could reach."""
    input_rate, output_rate = price.input_per_token, price.output_per_token
    for tier in price.tiers:
        if prompt_tokens > tier.above:
            input_rate = max(input_rate, tier.input_per_token)
            output_rate = max(output_rate, tier.output_per_token)
    return prompt_tokens * input_rate + completion_tokens * output_rate


def comparable_price(pricing: Pricing) -> float | None:
    """A provider's price to order providers by (`order = "cost"`): USD of a million tokens in
    and a million out at the highest rates any prompt-size tier charges (a million-token prompt
    reaches every tier below it), so a tier can only make a provider dearer, never cheaper than
    it is ranked. None: the price is unknown."""
    if isinstance(pricing, UnknownPrice):
        return None
    return worst_usd(pricing, PER_MILLION, PER_MILLION)
