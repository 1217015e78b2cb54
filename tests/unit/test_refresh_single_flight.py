"""The circuits and certifications each process caches are read again by ONE read however many
deciders find them due at once: 64 drivers deciding together made 17 circuit reads a second,
each a transaction on PostgreSQL. A change this process makes is never answered from a read
that started before it. (On the old code the first test counts 10 reads.)"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from jobrouter.breaker import Breakers, BreakerSettings
from jobrouter.states import CircuitState
from jobrouter.store.circuits import CircuitRow, CircuitStore


class SlowCircuits:
    """A store whose circuit read waits until released, counting the reads."""

    def __init__(self) -> None:
        self.reads = 0
        self.read = asyncio.Event()  # set at each read
        self.release = asyncio.Event()
        self.rows = [CircuitRow("a", CircuitState.CLOSED, 0, None, None)]

    async def list_circuits(self) -> list[CircuitRow]:
        self.reads += 1
        self.read.set()
        rows = list(self.rows)
        await self.release.wait()
        return rows

    async def reads_reach(self, count: int) -> None:
        while self.reads < count:
            self.read.clear()
            await self.read.wait()


def breakers(store: SlowCircuits) -> Breakers:
    return Breakers(cast(CircuitStore, cast(Any, store)), BreakerSettings())


async def test_deciders_that_find_the_circuits_due_together_share_one_read() -> None:
    store = SlowCircuits()
    subject = breakers(store)
    verdicts = [asyncio.create_task(subject.verdict("a")) for _ in range(10)]
    await store.reads_reach(1)
    for _ in range(5):
        await asyncio.sleep(0)  # every decider is waiting now
    store.release.set()
    assert all(v.ok for v in await asyncio.gather(*verdicts))
    assert store.reads == 1


async def test_a_read_begun_before_a_change_here_is_not_the_answer_after_it() -> None:
    store = SlowCircuits()
    subject = breakers(store)
    before = asyncio.create_task(subject.verdict("a"))
    await store.reads_reach(1)
    store.rows = [CircuitRow("a", CircuitState.OPEN, 5, 2e9, None)]  # opened, then forgotten here
    subject._read_at = float("-inf")
    subject._forgotten += 1
    after = asyncio.create_task(subject.verdict("a"))
    await store.reads_reach(2)
    store.release.set()
    await before  # it may see either read: both are after it began
    assert not (await after).ok  # from the second read, begun after the change
