"""A provider a job's budget held back (jobrouter.spending) counts in the step only where the
health read would let it be tried, and only until its `retry_at`."""

from __future__ import annotations

from jobrouter.policy import Eligibility
from jobrouter.step import _holding_back

NOW = 1_000.0
HELD = Eligibility(False, "budget shop: would cross its tokens cap", retry_at=NOW + 30)


def test_a_held_back_provider_is_refused_until_its_retry_at() -> None:
    """Mutant killed: the `retry_at > now` test dropped (a hold never expires: a waiting job
    stuck on a provider the budget has room for again)."""
    ok = {"a": Eligibility(True)}
    assert _holding_back(ok, {"a": HELD}, NOW) == {"a": HELD}
    assert _holding_back(ok, {"a": HELD}, NOW + 31) == ok


def test_the_health_read_refusal_stands_over_a_budget_hold() -> None:
    """An uncertified provider stays refused for its own reason (no retry), not turned into a
    budget wait. Mutant killed: `current.ok` dropped from the merge."""
    uncertified = {"a": Eligibility(False, "not certified for this contract")}
    assert _holding_back(uncertified, {"a": HELD}, NOW) == uncertified


def test_a_hold_for_good_never_expires() -> None:
    forever = Eligibility(False, "budget shop cannot hold this attempt")
    assert _holding_back({"a": Eligibility(True)}, {"a": forever}, NOW + 1e9) == {"a": forever}
