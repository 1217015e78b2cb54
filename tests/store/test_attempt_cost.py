"""An attempt's cost as the store keeps it, on every backend: the cost and where its price came
from, or why it is unknown (never 0, never without a reason), kept through an operator's
resolution of an answered `unknown` attempt."""

from __future__ import annotations

from jobrouter.models import AttemptUsage
from jobrouter.states import AttemptState
from jobrouter.store import SqlStore
from jobrouter.store.transitions import NO_USAGE_RECORDED
from tests.store.test_store import attempt_of, start, submit

PRICED = AttemptUsage(
    latency_ms=5.0, prompt_tokens=40, completion_tokens=7, cost_usd=0.000034, cost_source="config"
)
NO_PRICE = "model 'openai/local' is not in litellm's cost map (litellm 1.110.2)"


async def test_a_won_attempt_keeps_its_cost_and_its_source(store: SqlStore) -> None:
    """Mutant killed: `cost_source` not written by the finish (read back None)."""
    attempt = await start(store, await submit(store))
    outcome = await store.jobs.finish_attempt_cas(attempt.id, {"text": "tea"}, PRICED)
    assert outcome.won
    stored = await attempt_of(store, attempt.id)
    assert (stored.cost_usd, stored.cost_source, stored.cost_unknown) == (
        0.000034,
        "config",
        None,
    )
    assert (stored.prompt_tokens, stored.completion_tokens) == (40, 7)


async def test_an_unknown_cost_keeps_its_reason(store: SqlStore) -> None:
    """Mutant killed: `cost_unknown` not written (an unknown cost with no reason)."""
    attempt = await start(store, await submit(store))
    usage = AttemptUsage(prompt_tokens=40, completion_tokens=7, cost_unknown=NO_PRICE)
    await store.jobs.finish_attempt_cas(attempt.id, {"text": "tea"}, usage)
    stored = await attempt_of(store, attempt.id)
    assert (stored.cost_usd, stored.cost_source, stored.cost_unknown) == (None, None, NO_PRICE)


async def test_an_end_that_says_nothing_of_its_use_has_a_reason_all_the_same(
    store: SqlStore,
) -> None:
    """A lease expired, a cancel, a resolution: no usage, and still a reason. Mutant killed:
    the reason taken only from the end (`return usage.cost_unknown`: NULL)."""
    attempt = await start(store, await submit(store))
    await store.jobs.finish_attempt(
        attempt.id, AttemptState.FAILED, error_kind="not_sent", error="x", usage=AttemptUsage()
    )
    stored = await attempt_of(store, attempt.id)
    assert (stored.cost_usd, stored.cost_unknown) == (None, NO_USAGE_RECORDED)


async def test_a_known_cost_carries_no_reason(store: SqlStore) -> None:
    """Mutant killed: the reason kept beside a known cost (`if usage.cost_usd is not None`
    dropped): an attempt would say both what it cost and that nobody knows."""
    attempt = await start(store, await submit(store))
    await store.jobs.finish_attempt_cas(
        attempt.id, {"text": "tea"}, PRICED.model_copy(update={"cost_unknown": "stale"})
    )
    assert (await attempt_of(store, attempt.id)).cost_unknown is None


async def test_a_resolution_keeps_what_the_answered_call_cost(store: SqlStore) -> None:
    """An answer kept on an `unknown` attempt (its result could not be recorded), then an
    operator resolves it succeeded: the provider billed the call, and its cost stays. Mutant
    killed: `kept_usage` returning the resolution's empty usage (the cost wiped to NULL)."""
    attempt = await start(store, await submit(store))
    await store.jobs.finish_attempt(
        attempt.id,
        AttemptState.UNKNOWN,
        error_kind="unrecorded",
        error="answered; the result could not be recorded",
        usage=PRICED,
        output={"text": "tea"},
    )
    _, resolved = await store.jobs.resolve_attempt(
        attempt.id, AttemptState.SUCCEEDED, {"text": "tea"}, "checked", by="user:op"
    )
    assert resolved.state is AttemptState.SUCCEEDED
    assert (resolved.cost_usd, resolved.cost_source, resolved.prompt_tokens) == (
        0.000034,
        "config",
        40,
    )


async def test_a_resolution_keeps_why_the_cost_is_unknown(store: SqlStore) -> None:
    """A call that timed out (its cost unknown: no answer reported a usage), then resolved
    failed by an operator: the reason it had stays. Mutant killed: the attempt's own reason
    left out of `cost_unknown` (the generic one recorded instead)."""
    attempt = await start(store, await submit(store))
    timed_out = AttemptUsage(cost_unknown="no usage reported: the attempt ended without an answer")
    await store.jobs.finish_attempt(
        attempt.id, AttemptState.UNKNOWN, error_kind="unknown", error="timeout", usage=timed_out
    )
    _, resolved = await store.jobs.resolve_attempt(
        attempt.id, AttemptState.FAILED, None, "not posted", by="user:op"
    )
    assert resolved.cost_unknown == timed_out.cost_unknown
