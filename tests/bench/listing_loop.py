"""How long the listing calls that matter to the console take on an existing big database, and
the longest the event loop went without running a 1 ms ticker meanwhile (docs/benchmarks.md):

    python -m tests.bench.listing --jobs 1000000 --url sqlite:////tmp/listing.db  # builds it
    python -m tests.bench.listing_loop sqlite:////tmp/listing.db

Five calls of each in a row (the median is shown); with reads on the event loop the stall
spans all five."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from jobrouter.listing import JobFilter
from jobrouter.store import SqlStore, open_store

RUNS = 5
FILTERS = {
    "task=typo": JobFilter(task="typo"),
    "provider=typo": JobFilter(provider="typo"),
    "provider=stub (every job)": JobFilter(provider="stub"),
    "every owner": JobFilter(),
}


async def _stalls(call: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """(median ms of `call`, longest ms between two ticks of a 1 ms ticker meanwhile)."""
    gaps = [0.0]
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    samples = []
    for _ in range(RUNS):
        began = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - began)
    done.set()
    await ticking
    return statistics.median(samples) * 1000, max(gaps) * 1000


async def main(url: str) -> None:
    store: SqlStore = await open_store(url)
    try:
        for name, where in FILTERS.items():
            page = await _stalls(lambda: store.jobs.list_jobs(where, limit=50))  # noqa: B023
            counts = await _stalls(lambda: store.jobs.count_jobs_by_state(where))  # noqa: B023
            for what, (ms, stall) in (("page", page), ("counts", counts)):
                print(f"{name:26} {what:7} {ms:9.1f} ms   loop stalled {stall:9.1f} ms")
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
