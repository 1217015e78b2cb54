"""What an answered attempt records of its cost (router/attempt_call.py `answered_usage`): the
provider's priced usage as it came, and an unknown cost always with a reason."""

from __future__ import annotations

from jobrouter.attempt_call import answered_usage
from jobrouter.providers import Completion
from jobrouter.providers.base import Usage


def test_a_priced_answer_records_its_cost_and_source() -> None:
    usage = Usage(prompt_tokens=40, completion_tokens=7, cost_usd=0.01, cost_source="config")
    recorded = answered_usage(Completion(text="{}", usage=usage, model="m"), "primary", 3.0)
    assert (recorded.cost_usd, recorded.cost_source, recorded.cost_unknown) == (
        0.01,
        "config",
        None,
    )
    assert (recorded.prompt_tokens, recorded.completion_tokens, recorded.model) == (40, 7, "m")


def test_a_provider_that_says_nothing_of_its_cost_has_an_unknown_cost_saying_so() -> None:
    """A provider outside `jobrouter.providers` (a fake, a plug-in) reports no cost and no
    reason. Mutant killed: the provider's reason taken as is (`unknown = usage.cost_unknown`):
    an unknown cost with no reason."""
    recorded = answered_usage(Completion(text="{}", usage=Usage()), "primary", 3.0)
    assert recorded.cost_usd is None
    assert recorded.cost_unknown == "provider primary reported no cost"


def test_the_providers_reason_is_kept() -> None:
    usage = Usage(prompt_tokens=40, completion_tokens=7, cost_unknown="model not in the map")
    recorded = answered_usage(Completion(text="{}", usage=usage), "primary", 3.0)
    assert recorded.cost_unknown == "model not in the map"
