"""Every end of an attempt settles the budget reservation it holds, in the transaction that
writes its end (router/store/transitions.py, `end_attempt` and `settled_at`), on every
backend: to its reported tokens and cost when it has them; to nothing when nothing was sent
(`not_sent`); otherwise the reservation stays charged (an `unknown` attempt, an answer with no
usage, a USD hold whose price is unknown: the provider may have billed). An attempt that holds
no reservation ends in the one statement it always took."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jobrouter.models import Attempt, AttemptUsage
from jobrouter.states import AttemptState
from jobrouter.store import SqlStore
from jobrouter.store.connector import Params, Row, Tx
from jobrouter.store.spend import Hold, Reservation
from jobrouter.store.transitions import end_attempt
from tests.store.test_claim_runnable import submit

DAY = 1_764_720_000.0  # a period's start (00:00 UTC)
CAP = Hold("shop1_daily", DAY, 1.0, None)
WORST = Reservation((CAP,), 0.4, 300)  # two fit under the $1 cap, a third does not
ANSWERED = AttemptUsage(prompt_tokens=20, completion_tokens=30, cost_usd=0.01, cost_source="config")


async def started(store: SqlStore, key: str, reservation: Reservation | None = WORST) -> Attempt:
    job = await submit(store, key)
    _, attempt = await store.jobs.start_attempt(
        job.id, provider="a", model="m", worker="w1", lease_s=30.0, exclusive=False,
        reservation=reservation,
    )  # fmt: skip
    return attempt


async def charged(store: SqlStore, budget: str = CAP.budget) -> tuple[float, int, float, int]:
    """The budget's charge (what its cap is held against) and its settled actuals."""
    [period] = [p for p in await store.spend.periods() if p.budget == budget]
    return period.charged_usd, period.charged_tokens, period.actual_usd, period.actual_tokens


async def open_holds(store: SqlStore) -> list[dict[str, Any]]:
    return await store.connector.fetchall(
        "SELECT attempt_id, budget FROM budget_holds WHERE settled = 0 ORDER BY attempt_id", {}
    )


async def test_an_answer_with_its_cost_settles_to_it(store: SqlStore) -> None:
    """A won answer and a lost one, each reporting its usage and cost, move the budget's
    charge from their $0.40 reservations to their actual $0.01 each; the room freed lets a
    third attempt start. Mutant killed: `end_attempt` not settling (the `held` branch
    skipped: $0.80 stays charged and the third start is refused)."""
    won, lost = await started(store, "k0"), await started(store, "k1")
    assert (await store.jobs.finish_attempt_cas(won.id, {"ok": 1}, ANSWERED)).won
    await store.jobs.finish_attempt(
        lost.id, AttemptState.FAILED, error_kind="rejected", error="5xx", usage=ANSWERED
    )
    usd, tokens, actual_usd, actual_tokens = await charged(store)
    assert (usd, tokens) == (pytest.approx(0.02), 100)
    assert (actual_usd, actual_tokens) == (pytest.approx(0.02), 100)
    assert await open_holds(store) == []
    third = await started(store, "k2")  # $0.42 charged of $1: room again
    assert [h["attempt_id"] for h in await open_holds(store)] == [third.id]


async def test_an_attempt_that_sent_nothing_settles_to_nothing(store: SqlStore) -> None:
    """`not_sent` (the provider provably did not act): the reservation is taken back whole,
    failed or cancelled before the call. Mutant killed: the `not_sent` branch of
    `settled_at` removed (no usage: both stay charged at $0.80)."""
    failed, cancelled = await started(store, "k0"), await started(store, "k1")
    for attempt, state in ((failed, AttemptState.FAILED), (cancelled, AttemptState.CANCELLED)):
        await store.jobs.finish_attempt(
            attempt.id, state, error_kind="not_sent", error="refused", usage=AttemptUsage()
        )
    assert await charged(store) == (0.0, 0, 0.0, 0)
    assert await open_holds(store) == []


async def test_an_unknown_attempt_stays_charged_through_its_resolution(store: SqlStore) -> None:
    """An `unknown` end (a timeout: no usage) keeps its reservation charged, and so does an
    operator's resolution of it (an outcome says neither what was used nor that nothing was
    sent); so do an answer reporting no usage and an attempt cancelled mid-call with its job.
    Mutant killed: `settled_at` settling a missing usage as nothing (every charge taken
    back: $0)."""
    third = Reservation((CAP,), 0.3, 300)  # three fit under the $1 cap
    timed_out, silent, running = [await started(store, f"k{i}", third) for i in range(3)]
    await store.jobs.finish_attempt(
        timed_out.id, AttemptState.UNKNOWN, error_kind="unknown", error="timeout",
        usage=AttemptUsage(),
    )  # fmt: skip
    await store.jobs.finish_attempt_cas(silent.id, {"ok": 1}, AttemptUsage(cost_unknown="none"))
    await store.jobs.cancel_job(running.job_id, "not wanted")
    assert (await charged(store))[:2] == (pytest.approx(0.9), 900)
    await store.jobs.resolve_attempt(timed_out.id, AttemptState.FAILED, None, "checked", "op")
    assert (await charged(store))[:2] == (pytest.approx(0.9), 900)
    held = {h["attempt_id"] for h in await open_holds(store)}
    assert held == {timed_out.id, silent.id, running.id}


async def test_an_unknown_price_keeps_the_usd_hold_and_settles_a_token_hold(
    store: SqlStore,
) -> None:
    """Tokens reported, cost unknown: a hold that reserved USD stays charged (an unknown cost
    is never 0), a token-only hold (reserved $0, the price unknown at the start) settles to
    the reported tokens. Mutant killed: the skip of a USD hold in `settle_in` removed (the
    $0.40 hold settled at $0)."""
    tokens_cap = Hold("tokens_daily", DAY, None, 1000)
    usd_held = await started(store, "k0", Reservation((CAP,), 0.4, 300))
    tokens_held = await started(store, "k1", Reservation((tokens_cap,), 0.0, 300))
    no_price = AttemptUsage(prompt_tokens=20, completion_tokens=30, cost_unknown="no price")
    for attempt in (usd_held, tokens_held):
        await store.jobs.finish_attempt(
            attempt.id, AttemptState.FAILED, error_kind="rejected", error="5xx", usage=no_price
        )
    assert (await charged(store))[:2] == (pytest.approx(0.4), 300)
    assert await charged(store, "tokens_daily") == (0.0, 50, 0.0, 50)
    assert [h["attempt_id"] for h in await open_holds(store)] == [usd_held.id]


class CountingTx:
    """The store's transaction, counting the statements run through it."""

    def __init__(self, tx: Tx) -> None:
        self.tx, self.statements = tx, 0

    def after_commit(self, callback: Callable[[], None]) -> None:
        self.tx.after_commit(callback)

    async def execute(self, query: str, params: Params) -> int:
        self.statements += 1
        return await self.tx.execute(query, params)

    async def fetchone(self, query: str, params: Params) -> Row | None:
        self.statements += 1
        return await self.tx.fetchone(query, params)

    async def fetchall(self, query: str, params: Params) -> list[Row]:
        self.statements += 1
        return await self.tx.fetchall(query, params)


async def ended_in(store: SqlStore, attempt: Attempt, usage: AttemptUsage) -> int:
    """How many statements `end_attempt` runs to end `attempt` succeeded with `usage`."""
    async with store.connector.write() as tx:
        counting = CountingTx(tx)
        await end_attempt(
            store.connector.queries, counting, attempt, AttemptState.SUCCEEDED, usage, 0.0
        )
    return counting.statements


async def test_an_attempt_without_a_reservation_ends_in_one_statement(store: SqlStore) -> None:
    """No budget: the end is its one UPDATE (whether it holds a reservation comes back with
    it); a held one adds the read of its holds and two statements a hold. Mutant killed: the
    `held` check removed (the read of holds run for every end: 2 statements)."""
    assert await ended_in(store, await started(store, "k0", None), ANSWERED) == 1
    assert await ended_in(store, await started(store, "k1"), ANSWERED) == 4
