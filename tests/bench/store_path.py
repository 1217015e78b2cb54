"""The store's own cost of a job, without the router around it: `create_and_start` with its
first attempt, then `finish_attempt_cas`, `--concurrency` jobs at a time on a fresh SQLite file;
CPU per job (every thread) and, with `--statements`, the wall time of each statement.
`--without-index NAME` drops that index first (repeatable): what its upkeep costs a job, read
against a run without (interleave the runs: the machine's noise is larger than one index);
`--verdict` gives each finish a live verdict, as a contract's task does.

    python -m tests.bench.store_path --concurrency 64 --jobs 3000 --statements
    python -m tests.bench.store_path --without-index jobs_by_task --without-index jobs_by_state
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from typing import Any

from jobrouter.models import AttemptUsage
from jobrouter.store import open_store
from jobrouter.store import sqlite as sqlite_connector
from jobrouter.store.live_watch import LiveVerdict
from jobrouter.store.starts import AttemptStart

ANSWER = {"text": "Warm saffron tea for cold evenings."}


def time_statements(spent: Counter[str], count: Counter[str]) -> None:
    """Wrap the connector's statement methods: wall time per statement, by its first words."""
    tx = sqlite_connector._SqliteTx
    execute, fetchall = tx.execute, tx.fetchall

    async def timed_execute(self: Any, query: str, params: Any) -> int:
        began = time.perf_counter()
        try:
            return await execute(self, query, params)
        finally:
            spent[query[:60]] += time.perf_counter() - began
            count[query[:60]] += 1

    async def timed_fetchall(self: Any, query: str, params: Any) -> list[Any]:
        began = time.perf_counter()
        try:
            return await fetchall(self, query, params)
        finally:
            spent[query[:60]] += time.perf_counter() - began
            count[query[:60]] += 1

    tx.execute, tx.fetchall = timed_execute, timed_fetchall  # type: ignore[method-assign]


async def run(concurrency: int, jobs: int, without: list[str], verdict: bool) -> None:
    store = await open_store(f"sqlite:///{tempfile.mkdtemp(prefix='jobrouter-store-')}/s.db")
    for index in without:
        async with store.connector.write() as tx:
            await tx.execute(f"DROP INDEX {index}", {})
    store.connector.jobs_in_flight = lambda: concurrency  # type: ignore[attr-defined]
    usage = AttemptUsage(latency_ms=1.0, model="openai/stub", prompt_tokens=40, completion_tokens=5)
    first = AttemptStart("stub", "openai/stub", "bench", 30.0, ())
    taken = 0

    async def one(index: int) -> None:
        _, attempt = await store.jobs.create_and_start(
            owner="bench",
            idempotency_key=f"k{index}",
            task="bench",
            input={"product": {"name": f"Saffron tea {index}"}, "tone": "warm"},
            params={},
            deadline_s=60,
            claimed_by="bench",
            claim_s=60,
            first=first,
        )
        assert attempt is not None
        seen = LiveVerdict(attempt.id, "stub", "bench", failed=False) if verdict else None
        await store.jobs.finish_attempt_cas(attempt.id, ANSWER, usage, verdict=seen)

    async def lane() -> None:
        nonlocal taken
        while taken < jobs:
            taken += 1
            await one(taken)

    for index in range(20):  # warm: statements prepared, pages cached
        await one(-1 - index)
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    cpu_ms = (time.process_time() - cpu) * 1000 / jobs
    rate = jobs / (time.perf_counter() - wall)
    print(f"c={concurrency}: {cpu_ms:.3f} ms of CPU a job, {rate:.0f} jobs/s")
    await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--statements", action="store_true")
    parser.add_argument("--without-index", action="append", default=[], metavar="NAME")
    parser.add_argument("--verdict", action="store_true")
    args = parser.parse_args()
    spent: Counter[str] = Counter()
    count: Counter[str] = Counter()
    if args.statements:
        time_statements(spent, count)
    asyncio.run(run(args.concurrency, args.jobs, args.without_index, args.verdict))
    total = args.jobs + 20
    for query, seconds in spent.most_common():
        print(f"{seconds * 1e6 / count[query]:7.1f} us  x{count[query] / total:.2f} a job  {query}")


if __name__ == "__main__":
    main()
