"""`decide_delivery` (router/delivery.py): the try -> delivered / retry / dead decision both
deliverers take, as a pure function: no store, no network, a given clock and jitter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrouter.delivery import DeliveryDecision, DeliverySettings, Verdict, decide_delivery
from jobrouter.providers import backoff
from jobrouter.webhook import Outcome

SETTINGS = DeliverySettings(max_tries=4, backoff_initial_s=10.0, backoff_max_s=60.0)
NOW = 1_800_000_000.0
FAILED = Outcome(False, "HTTP 503: busy")


def whole(bound: float) -> float:
    return bound  # the whole bound: the waits are known


@pytest.fixture(autouse=True)
def _backoff_on() -> Iterator[None]:
    backoff.set_testing(no_backoff=False)
    yield
    backoff.set_testing(no_backoff=False)


def test_a_delivered_try_is_delivered_whatever_the_count() -> None:
    """Mutant: the dead-letter check before the delivered one (a 2xx on the last try buried),
    seen failing."""
    for tries in (1, SETTINGS.max_tries, SETTINGS.max_tries + 3):
        decision = decide_delivery(Outcome(True), tries, SETTINGS, now=NOW, jitter=whole)
        assert decision == DeliveryDecision(Verdict.DELIVERED, tries)


def test_the_max_tries_th_failure_is_a_dead_letter() -> None:
    """Mutant: `>` for `>=` (one try more than `[outbox] max_tries`), seen failing."""
    assert decide_delivery(FAILED, 3, SETTINGS, now=NOW, jitter=whole).verdict is Verdict.RETRY
    dead = decide_delivery(FAILED, 4, SETTINGS, now=NOW, jitter=whole)
    assert dead == DeliveryDecision(Verdict.DEAD, 4)


def test_a_retry_waits_the_doubling_backoff_from_now() -> None:
    """Mutants: the due time from another clock than `now`, the tries off by one (both seen
    failing)."""
    waits = [decide_delivery(FAILED, n, SETTINGS, now=NOW, jitter=whole) for n in (1, 2, 3)]
    assert [(d.delay_s, d.due_at) for d in waits] == [
        (10.0, NOW + 10.0),
        (20.0, NOW + 20.0),
        (40.0, NOW + 40.0),
    ]


@pytest.mark.parametrize(
    ("retry_after", "delay"),
    [(None, 10.0), (3.0, 10.0), (30.0, 30.0), (3600.0, 60.0)],
)
def test_a_receivers_retry_after_stretches_the_wait_up_to_backoff_max(
    retry_after: float | None, delay: float
) -> None:
    """The longer of the backoff and Retry-After, capped at `backoff_max_s` (as `next_try_in`
    was). Mutant: the Retry-After not passed on (seen failing at 30 and 3600)."""
    outcome = Outcome(False, "HTTP 429", retry_after)
    decision = decide_delivery(outcome, 1, SETTINGS, now=NOW, jitter=whole)
    assert (decision.verdict, decision.delay_s) == (Verdict.RETRY, delay)


def test_the_jitter_given_is_the_one_used() -> None:
    half = decide_delivery(FAILED, 2, SETTINGS, now=NOW, jitter=lambda bound: bound / 2)
    assert half.delay_s == 10.0


def test_the_decision_obeys_the_one_test_switch() -> None:
    """Under `backoff.set_testing()` a retry is due at once (the outbox had no switch)."""
    backoff.set_testing()
    decision = decide_delivery(FAILED, 2, SETTINGS, now=NOW, jitter=whole)
    assert (decision.verdict, decision.delay_s, decision.due_at) == (Verdict.RETRY, 0.0, NOW)


@given(
    st.booleans(),
    st.integers(min_value=1, max_value=50),
    st.none() | st.floats(min_value=0.0, max_value=1e7),
)
def test_every_decision_is_one_of_three_and_bounded(
    delivered: bool, tries: int, retry_after: float | None
) -> None:
    outcome = Outcome(delivered, "" if delivered else "HTTP 500", retry_after)
    decision = decide_delivery(outcome, tries, SETTINGS, now=NOW)
    assert decision.tries == tries
    if delivered:
        assert decision.verdict is Verdict.DELIVERED
    elif tries >= SETTINGS.max_tries:
        assert decision.verdict is Verdict.DEAD
    else:
        assert decision.verdict is Verdict.RETRY
        assert 0.0 <= decision.delay_s <= SETTINGS.backoff_max_s
        assert decision.due_at == NOW + decision.delay_s
