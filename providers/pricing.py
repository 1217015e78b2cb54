"""What a provider's tokens cost: its configured prices, else litellm's cost map as shipped.

A provider's price is resolved once per process (`resolve_price`), never per call:

    [providers.NAME.price]   input_usd_per_million, output_usd_per_million   source "config"
    litellm's shipped map    model_prices_and_context_window_backup.json     source "litellm_map"
    neither                  `UnknownPrice` with the reason                  cost unknown

An unknown price is never 0: a cost of 0 is a claim (a local server the operator priced at 0
in its config), not a default. The map is the JSON file the installed litellm ships and reads
itself when `LITELLM_LOCAL_MODEL_COST_MAP=True` (`litellm.litellm_core_utils.get_model_cost_map`,
`GetModelCostMap.read_local_model_cost_map_bytes`): read here as a file, without importing litellm
(4 s) and without the network, so the native transport prices its calls at the cost of one JSON
parse per process (docs/benchmarks.md), and both transports price with the same numbers. The
litellm transport does not read the cost litellm computes for each response
(`_hidden_params["response_cost"]`): it is 0.0 for a model `register_model` declared (a cost
claimed, not known), and one rule for both transports makes a replayed cassette's cost the live
one's.

What the map holds beyond a model's input and output price per token is applied as litellm
applies it only for the prompt-size tiers (`input_cost_per_token_above_200k_tokens` and their
output twin: above the threshold both prices change). Cached-input discounts, reasoning, audio
and image prices are not: the router sees only prompt and completion counts, so it charges
every prompt token at the input price (an upper bound where a provider discounted a cache hit).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeGuard

from jobrouter.providers.config import ProviderConfig

PriceSource = Literal["config", "litellm_map"]
MAP_FILE = "model_prices_and_context_window_backup.json"
_TIER_KEY = re.compile(r"^(input|output)_cost_per_token_above_(\d+)(k?)_tokens$")
PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Tier:
    """Prices per token that hold when a call's prompt has more than `above` tokens."""

    above: int
    input_per_token: float
    output_per_token: float


@dataclass(frozen=True)
class Price:
    """USD per token, in and out, and where the numbers came from."""

    input_per_token: float
    output_per_token: float
    source: PriceSource
    tiers: tuple[Tier, ...] = ()  # ascending by `above`

    def rates(self, prompt_tokens: int) -> tuple[float, float]:
        """(input, output) USD per token for a call with `prompt_tokens` in its prompt."""
        rates = (self.input_per_token, self.output_per_token)
        for tier in self.tiers:
            if prompt_tokens > tier.above:
                rates = (tier.input_per_token, tier.output_per_token)
        return rates

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD of a call that read `prompt_tokens` and wrote `completion_tokens`."""
        input_rate, output_rate = self.rates(prompt_tokens)
        return prompt_tokens * input_rate + completion_tokens * output_rate


@dataclass(frozen=True)
class UnknownPrice:
    """No price is known for the provider; `reason` says why and how to give one."""

    reason: str


Pricing = Price | UnknownPrice


def resolve_price(name: str, config: ProviderConfig) -> Pricing:
    """The price of provider `name`: its configured one, else litellm's shipped map's."""
    if config.price is not None:
        return Price(
            config.price.input_usd_per_million / PER_MILLION,
            config.price.output_usd_per_million / PER_MILLION,
            "config",
        )
    return map_price(name, config.model)


def map_price(name: str, model: str) -> Pricing:
    """The price litellm's shipped cost map gives `model`, or why there is none."""
    how = f"set [providers.{name}.price] input_usd_per_million and output_usd_per_million"
    try:
        shipped = shipped_map()
    except (OSError, ValueError) as exc:
        return UnknownPrice(f"litellm's cost map could not be read ({exc}); {how}")
    entry = _entry(shipped, model)
    if entry is None:
        return UnknownPrice(
            f"model {model!r} is not in litellm's cost map (litellm {_litellm_version()}); {how}"
        )
    return _price_of(entry, model, how)


def _entry(shipped: dict[str, Any], model: str) -> dict[str, Any] | None:
    """`model`'s entry as litellm finds it: the exact name, else the name without its provider
    prefix when the entry is that provider's (``openai/gpt-4o-mini`` -> ``gpt-4o-mini``)."""
    entry = shipped.get(model)
    if isinstance(entry, dict):
        return entry
    prefix, _, bare = model.partition("/")
    entry = shipped.get(bare) if bare else None
    if isinstance(entry, dict) and entry.get("litellm_provider") == prefix:
        return entry
    return None


def _price_of(entry: dict[str, Any], model: str, how: str) -> Pricing:
    input_rate, output_rate = _rate(entry, "input"), _rate(entry, "output")
    if input_rate is None or output_rate is None:
        return UnknownPrice(
            f"litellm's cost map prices {model!r} by something other than input and output "
            f"tokens; {how}"
        )
    return Price(input_rate, output_rate, "litellm_map", _tiers(entry, input_rate, output_rate))


def _rate(entry: dict[str, Any], side: str) -> float | None:
    value = entry.get(f"{side}_cost_per_token")
    return float(value) if _is_rate(value) else None


def _tiers(entry: dict[str, Any], input_rate: float, output_rate: float) -> tuple[Tier, ...]:
    """The prompt-size tiers of `entry`; a side a tier leaves out keeps the price below it."""
    found: dict[int, dict[str, float]] = {}
    for key, value in entry.items():
        match = _TIER_KEY.match(key)
        if match is None or not _is_rate(value):
            continue
        side, number, thousands = match.groups()
        above = int(number) * (1000 if thousands else 1)
        found.setdefault(above, {})[side] = float(value)
    tiers = []
    for above in sorted(found):
        input_rate = found[above].get("input", input_rate)
        output_rate = found[above].get("output", output_rate)
        tiers.append(Tier(above, input_rate, output_rate))
    return tuple(tiers)


def _is_rate(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


@functools.cache
def shipped_map() -> dict[str, Any]:
    """litellm's cost map as its installed package ships it (parsed once per process)."""
    spec = importlib.util.find_spec("litellm")  # finds the package without running it
    if spec is None or spec.origin is None:
        raise OSError("litellm is not installed")
    data = json.loads((Path(spec.origin).parent / MAP_FILE).read_bytes())
    if not isinstance(data, dict):
        raise ValueError(f"{MAP_FILE} holds {type(data).__name__}, not an object")
    return data


def _litellm_version() -> str:
    try:
        return importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


@dataclass(frozen=True)
class Charge:
    """A call's cost as recorded: `usd` None is unknown, and then `unknown` says why."""

    usd: float | None
    source: PriceSource | None
    unknown: str | None = None


NO_USAGE = "the provider reported no token usage"


def charge(pricing: Pricing, prompt_tokens: int | None, completion_tokens: int | None) -> Charge:
    """The cost of a call that reported `prompt_tokens` / `completion_tokens` (None: not
    reported) under `pricing`: unknown (with the reason) unless both the price and the
    counts are known; a completion count left out of a report that has a prompt count is
    unknown too, never taken as 0."""
    if isinstance(pricing, UnknownPrice):
        return Charge(None, None, pricing.reason)
    if prompt_tokens is None or completion_tokens is None:
        return Charge(None, pricing.source, NO_USAGE)
    return Charge(pricing.cost(prompt_tokens, completion_tokens), pricing.source)
