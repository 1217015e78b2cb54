"""A provider's price and a call's cost: the configured price, litellm's cost map as shipped
(read as a file, the numbers litellm itself uses), and an unknown price or usage recorded as
unknown with its reason, never 0. Over both transports: the same answer costs the same."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jobrouter.providers import _litellm
from jobrouter.providers.config import ProviderConfig
from jobrouter.providers.pricing import (
    NO_USAGE,
    Price,
    UnknownPrice,
    charge,
    map_price,
    resolve_price,
    shipped_map,
)
from tests.providers.conftest import TRANSPORTS, MakeProvider
from tests.providers.fault_server import FaultServer
from tests.providers.test_openai_http import REQUEST

PRICE = {"input_usd_per_million": 0.5, "output_usd_per_million": 2.0}


def test_a_configured_price_is_the_price_per_million_tokens() -> None:
    """Mutant killed: the per-million price taken as per token (cost a million times too big)."""
    price = resolve_price("p", ProviderConfig(model="openai/local", price=PRICE))
    assert price == Price(0.5e-6, 2.0e-6, "config")
    assert charge(price, 1_000_000, 500_000).usd == pytest.approx(0.5 + 1.0)
    assert charge(price, 1_000_000, 500_000).source == "config"


def test_a_configured_price_wins_over_the_map() -> None:
    """Mutant killed: the map looked up first (a priced gpt-4o-mini would be charged OpenAI's)."""
    price = resolve_price("p", ProviderConfig(model="openai/gpt-4o-mini", price=PRICE))
    assert isinstance(price, Price) and price.source == "config"


def test_a_model_missing_from_the_map_has_an_unknown_price_with_its_reason() -> None:
    """Mutant killed: a missing model priced 0 (`Price(0, 0, ...)`): its calls would look free
    and a budget would never see them."""
    price = map_price("local", "openai/gemma-3-270m")
    assert isinstance(price, UnknownPrice)
    assert "'openai/gemma-3-270m' is not in litellm's cost map" in price.reason
    assert "[providers.local.price]" in price.reason  # how to give one
    cost = charge(price, 40, 7)
    assert (cost.usd, cost.source, cost.unknown) == (None, None, price.reason)


@pytest.mark.parametrize(("prompt", "completion"), [(None, 7), (40, None), (None, None)])
def test_an_unreported_count_is_an_unknown_cost_never_a_zero(
    prompt: int | None, completion: int | None
) -> None:
    """Mutant killed: a missing count taken as 0 (`prompt_tokens or 0`): the call would be
    charged less than it cost."""
    cost = charge(Price(1e-6, 1e-6, "config"), prompt, completion)
    assert (cost.usd, cost.source, cost.unknown) == (None, "config", NO_USAGE)


def test_a_prefix_other_than_the_entrys_provider_finds_nothing() -> None:
    """`anthropic/gpt-4o-mini` is no OpenAI model: litellm's rule strips a prefix only for the
    entry's own provider. Mutant killed: the prefix stripped whatever it names."""
    assert isinstance(map_price("p", "openai/gpt-4o-mini"), Price)
    assert isinstance(map_price("p", "anthropic/gpt-4o-mini"), UnknownPrice)


def _tiered_model() -> str:
    for name, entry in shipped_map().items():
        if (
            isinstance(entry, dict)
            and "input_cost_per_token_above_200k_tokens" in entry
            and "output_cost_per_token_above_200k_tokens" in entry
            and entry.get("input_cost_per_token_above_200k_tokens")
            != entry.get("input_cost_per_token")
            and entry.get("mode") == "chat"
        ):
            return name
    raise AssertionError("no tiered chat model in the shipped map")


def test_the_map_prices_as_litellm_does() -> None:
    """Our reading of the shipped map gives litellm's own `cost_per_token` (litellm imported
    offline here, as the product imports it): a plain model, the same one behind its provider
    prefix, and a prompt-size tier below and above its threshold. Mutants killed: the tiers
    ignored (a 300k-token prompt charged the base price); input and output prices swapped."""
    litellm = _litellm.load()
    tiered = _tiered_model()
    for model, prompt in [
        ("gpt-4o-mini", 1234),
        ("openai/gpt-4o-mini", 1234),
        ("gpt-4o", 10),
        (tiered, 150_000),
        (tiered, 300_000),
    ]:
        price = map_price("p", model)
        assert isinstance(price, Price) and price.source == "litellm_map", model
        ours = price.cost(prompt, 345)
        theirs = sum(
            litellm.cost_per_token(model=model, prompt_tokens=prompt, completion_tokens=345)
        )
        assert ours == pytest.approx(theirs, rel=1e-9), (model, prompt)
    price = map_price("p", tiered)
    assert isinstance(price, Price) and price.rates(300_000) != price.rates(150_000)


def test_pricing_from_the_map_does_not_import_litellm() -> None:
    """The native transport prices its calls without litellm's 4 s import: a fresh process
    that prices a model from the map has not imported it. Mutant killed: the map taken from
    `litellm.model_cost`."""
    code = (
        "import sys\n"
        "from jobrouter.providers.pricing import map_price, Price\n"
        "assert isinstance(map_price('p', 'gpt-4o-mini'), Price)\n"
        "assert 'litellm' not in sys.modules, 'litellm imported'\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_answer_costs_its_reported_tokens_at_the_price(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """Both transports price an answer the same way: the server's reported usage at the
    configured price, its source recorded. Mutant killed: the adapter leaving the cost out
    (`cost_usd=None`, as the native transport did before, and as litellm's `response_cost` is
    for this unmapped model)."""
    provider = make_provider(structured_output="json_object_schema", price=PRICE)
    completion = await provider.complete(REQUEST)
    usage = completion.usage
    assert usage.prompt_tokens is not None and usage.completion_tokens == 7
    expected = usage.prompt_tokens * 0.5e-6 + 7 * 2.0e-6
    assert usage.cost_usd == pytest.approx(expected)
    assert (usage.cost_source, usage.cost_unknown) == ("config", None)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_unpriced_model_costs_unknown_on_both_transports(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """No price configured and the model not in the map: the cost is unknown with the reason,
    on both transports. Mutant killed: an unknown price charged as 0."""
    provider = make_provider(structured_output="json_object_schema")
    usage = (await provider.complete(REQUEST)).usage
    assert usage.cost_usd is None and usage.cost_source is None
    assert usage.cost_unknown is not None and "not in litellm's cost map" in usage.cost_unknown


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_answer_without_usage_costs_unknown(
    fault: FaultServer, make_provider: MakeProvider
) -> None:
    """A server that reports no usage: the cost is unknown, never 0, even at a known price.
    Mutant killed: missing counts taken as 0."""
    fault.control(default={"kind": "answer", "usage": False})
    provider = make_provider(structured_output="json_object_schema", price=PRICE)
    usage = (await provider.complete(REQUEST)).usage
    assert (usage.cost_usd, usage.cost_source, usage.cost_unknown) == (None, "config", NO_USAGE)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_warm_up_resolves_the_price_before_the_first_call(
    fault: FaultServer, make_provider: MakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker warms its providers up before it claims a job: the price (litellm's map: a
    3.5 MB JSON parse) is resolved then, on a thread, not on the event loop inside the first
    attempt. Once warm, resolving again would fail here, and the call still prices. Mutant
    killed: the native transport's `warm_up` not calling the adapter's (its first answer
    parsed the map on the loop)."""
    provider = make_provider(structured_output="json_object_schema")
    await provider.warm_up()

    def no_second_resolution(*args: object) -> None:
        raise AssertionError("the price was resolved again after warm_up")

    monkeypatch.setattr("jobrouter.providers.pricing.resolve_price", no_second_resolution)
    usage = (await provider.complete(REQUEST)).usage
    assert usage.cost_unknown is not None and "not in litellm's cost map" in usage.cost_unknown
