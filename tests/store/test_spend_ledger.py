"""The budget ledger on every backend (router/store/spend.py): a reservation charges every
covering budget or none, never crosses a cap under concurrency (two stores: two routers'
connections on PostgreSQL, two writers on one SQLite file), and settles to the actual cost.
The start paths that charge it are tests/store/test_budget_starts.py."""

from __future__ import annotations

import asyncio
import random

import pytest

from jobrouter.store import SqlStore, open_store
from jobrouter.store.spend import Crossed, Hold, Period

DAY = 1_764_720_000.0  # a period's start (00:00 UTC)


async def _reserve(
    store: SqlStore, attempt_id: str, holds: list[Hold], usd: float, tokens: int
) -> Crossed | None:
    async with store.connector.write() as tx:
        return await store.spend.reserve_in(tx, attempt_id, holds, usd, tokens)


async def _settle(store: SqlStore, attempt_id: str, usd: float, tokens: int) -> None:
    async with store.connector.write() as tx:
        await store.spend.settle_in(tx, attempt_id, usd, tokens)


async def _period(store: SqlStore, budget: str) -> Period:
    return next(p for p in await store.spend.periods() if p.budget == budget)


async def test_a_reservation_one_budget_refuses_charges_none(store: SqlStore) -> None:
    """`shop` has room, `tight` has not: nothing is charged to either, and the refusal names
    `tight`, its cap and its charge. Mutant killed: `_take_back` skipped (`shop` keeps a
    charge for an attempt that never started)."""
    shop, tight = Hold("shop", DAY, 10.0, None), Hold("tight", DAY, 1.0, None)
    assert await _reserve(store, "a1", [shop, tight], 0.75, 100) is None
    crossed = await _reserve(store, "a2", [tight, shop], 0.5, 100)
    assert crossed == Crossed("tight", "usd", 1.0, 0.75)
    assert (await _period(store, "shop")).charged_usd == pytest.approx(0.75)
    assert (await _period(store, "tight")).charged_usd == pytest.approx(0.75)


async def test_a_token_cap_refuses_on_its_own(store: SqlStore) -> None:
    """Mutant killed: the token side left out of `charge_budget`'s WHERE."""
    tokens = Hold("tokens", DAY, None, 1000)
    assert await _reserve(store, "a1", [tokens], 0.0, 600) is None
    assert await _reserve(store, "a2", [tokens], 0.0, 600) == Crossed("tokens", "tokens", 1000, 600)


async def test_a_settled_reservation_charges_its_actual_cost(store: SqlStore) -> None:
    """The reservation becomes the actual: the room it held beyond the actual is free again.
    Mutant killed: `settle_budget` adding the actual without taking back the reservation."""
    budget = Hold("b", DAY, 1.0, None)
    assert await _reserve(store, "a1", [budget], 0.9, 500) is None
    assert await _reserve(store, "a2", [budget], 0.2, 100) is not None  # 0.9 held
    await _settle(store, "a1", 0.1, 50)
    period = await _period(store, "b")
    assert (period.charged_usd, period.actual_usd, period.reserved_usd) == pytest.approx(
        (0.1, 0.1, 0.9)
    )
    await _settle(store, "a1", 0.1, 50)  # settled once: a second settle changes nothing
    assert (await _period(store, "b")).charged_usd == pytest.approx(0.1)
    assert await _reserve(store, "a2", [budget], 0.2, 100) is None


async def test_a_thousand_concurrent_reservations_on_two_stores_never_cross_the_cap(
    db_url: str,
) -> None:
    """The property of issue 29, at the ledger: 1,000 reservations at once, half through each
    of two stores (on PostgreSQL two connection pools, as two routers have), against a $5 cap,
    each a random worst case; then each settles at a random actual no more than its
    reservation. Reserved never exceeds the cap, actual never exceeds reserved, and the cap
    admits as much as it can (the refused ones were refused because they did not fit).
    Mutant killed: the cap check taken out of `charge_budget` (read-then-write in Python
    instead: `budget_charged`, then an unconditional charge) overshoots on PostgreSQL."""
    rng = random.Random(29)
    cap = 5.0
    worst = [round(rng.uniform(0.005, 0.02), 6) for _ in range(1000)]
    one, two = await open_store(db_url), await open_store(db_url)
    try:
        hold = [Hold("cap", DAY, cap, None)]
        results = await asyncio.gather(
            *(_reserve((one, two)[i % 2], f"a{i}", hold, usd, 10) for i, usd in enumerate(worst))
        )
        admitted = [i for i, crossed in enumerate(results) if crossed is None]
        period = await _period(one, "cap")
        assert period.reserved_usd <= cap + 1e-9
        assert period.reserved_usd == pytest.approx(sum(worst[i] for i in admitted))
        assert len(admitted) < 1000  # the cap was reached: the property was put to the test
        assert cap - period.reserved_usd < max(worst)  # and nothing was refused with room left
        actual = {i: round(worst[i] * rng.uniform(0.1, 1.0), 6) for i in admitted}
        await asyncio.gather(
            *(_settle((one, two)[i % 2], f"a{i}", usd, 5) for i, usd in actual.items())
        )
        period = await _period(one, "cap")
        assert period.actual_usd == pytest.approx(sum(actual.values()))
        assert period.actual_usd <= period.reserved_usd <= cap + 1e-9
        assert period.charged_usd == pytest.approx(period.actual_usd)
    finally:
        await one.close()
        await two.close()
