"""How long a page of the job listing takes with 10^6 jobs in the table (docs/benchmarks.md):

    python -m tests.bench.listing --jobs 1000000 --url sqlite:////tmp/listing.db

Prefills N finished jobs of owner `prefill` (tests/bench/prefill.py), adds 20 jobs of owner
`shop` of which 5 wait for a person (`unknown`), then times each listing (median of 20 runs,
through `SqlStore`, as the HTTP route and the CLI call it)."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from jobrouter.listing import JobFilter
from jobrouter.states import JobState
from jobrouter.store import SqlStore, open_store
from tests.bench.prefill import prefill_postgres, prefill_sqlite
from tests.support.store_jobs import count_jobs, create_job

RUNS = 20


async def _timed(call: Callable[[], Awaitable[Any]]) -> float:
    samples = []
    for _ in range(RUNS):
        began = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


async def _seed(store: SqlStore) -> None:
    for i in range(20):
        job = await create_job(
            store,
            owner="shop",
            idempotency_key=f"s{i}",
            task="caption",
            input={},
            params={},
            deadline_s=None,
            claimed_by=None,
            claim_s=1.0,
        )
        if i % 4 == 0:
            await store.jobs.settle_job(job.id, JobState.RUNNING, error=None)
            await store.jobs.settle_job(job.id, JobState.UNKNOWN, error="no answer")


async def main(url: str, jobs: int) -> None:
    store = await open_store(url)  # migrates
    await store.close()
    if url.startswith("sqlite"):
        prefill_sqlite(url, jobs)
    else:
        await prefill_postgres(url, jobs)
    store = await open_store(url)
    try:
        await _seed(store)
        deep = await store.jobs.list_jobs(JobFilter(), limit=500)
        cases: dict[str, Callable[[], Awaitable[Any]]] = {
            "first page, every owner (50)": lambda: store.jobs.list_jobs(JobFilter(), limit=50),
            "page after 500 jobs (cursor)": lambda: store.jobs.list_jobs(
                JobFilter(), limit=50, cursor=deep.next_cursor
            ),
            "one owner's first page": lambda: store.jobs.list_jobs(
                JobFilter(owner="shop"), limit=50
            ),
            "needs attention, every owner": lambda: store.jobs.list_jobs(
                JobFilter.of(needs_attention=True), limit=50
            ),
            "task filter (matches 10^6)": lambda: store.jobs.list_jobs(
                JobFilter(task="bench"), limit=50
            ),
            "counts by state, one owner": lambda: store.jobs.count_jobs_by_state(
                JobFilter(owner="shop")
            ),
            "counts by state, every owner": lambda: store.jobs.count_jobs_by_state(JobFilter()),
        }
        print(f"| listing ({await count_jobs(store):,} jobs, {url.split(':')[0]}) | median ms |")
        print("|---|---:|")
        for name, call in cases.items():
            print(f"| {name} | {await _timed(call):.2f} |")
    finally:
        await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--url", default="sqlite:////tmp/jobrouter-listing.db")
    args = parser.parse_args()
    asyncio.run(main(args.url, args.jobs))
