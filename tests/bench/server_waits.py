"""What a read that waits on the PostgreSQL server (migration 0012) costs in time and in server
CPU, against a LISTEN/NOTIFY wake-up (docs/benchmarks.md, "Waiting on the server"):

    python -m tests.bench.server_waits [--step 0.005 0.002] [--samples 60]

- delay: from a settle's COMMIT (as its client sees it return) to the return of a waiting read
  of that job (`await_settled`), and from a NOTIFY's commit to its arrival at a listener;
- CPU: the waiting backend's own CPU (its /proc entry) over a 5 s wait that finds nothing, with
  200 settled jobs in the table, for each function. Needs the server on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import TYPE_CHECKING, TypeAlias

import asyncpg

from jobrouter.states import JobState
from jobrouter.store import SqlStore, open_store
from jobrouter.store.waits import SETTLED
from tests.bench.cpu import process_cpu_s
from tests.store.pg import fresh_database
from tests.support.store_jobs import create_job

if TYPE_CHECKING:  # asyncpg's classes are generic only in its stubs
    Conn: TypeAlias = asyncpg.Connection[asyncpg.Record]

IDLE_S = 5.0


def quantiles(delays: list[float]) -> str:
    ordered = sorted(delays)
    return f"p50 {statistics.median(ordered):.2f} ms, p90 {ordered[int(len(ordered) * 0.9)]:.2f} ms"


async def read_delays(store: SqlStore, other: SqlStore, step: float, samples: int) -> list[float]:
    delays = []
    for n in range(samples):
        job = await create_job(
            other,
            owner="o",
            idempotency_key=f"{step}-{n}",
            task="t",
            input={},
            params={},
            deadline_s=None,
            claimed_by=None,
            claim_s=30.0,
        )
        params = {"ids": json.dumps([job.id]), "states": SETTLED, "wait_s": 5.0, "step_s": step}
        reading = asyncio.create_task(
            store.connector.fetchall(store.connector.queries["await_settled"], params)
        )
        await asyncio.sleep(0.02 + (n % 7) * 0.003)  # not in step with the looks
        await other.jobs.settle_job(job.id, JobState.FAILED, error="x")
        committed = time.perf_counter()
        await reading
        delays.append((time.perf_counter() - committed) * 1000)
    return delays


async def notify_delays(url: str, samples: int) -> list[float]:
    listener, sender = await asyncpg.connect(url), await asyncpg.connect(url)
    heard: asyncio.Queue[float] = asyncio.Queue()
    await listener.add_listener("bench_hop", lambda *_: heard.put_nowait(time.perf_counter()))
    delays = []
    for n in range(samples):
        await asyncio.sleep(0.02 + (n % 7) * 0.003)
        await sender.execute("NOTIFY bench_hop")
        committed = time.perf_counter()
        delays.append((await heard.get() - committed) * 1000)
    await listener.close()
    await sender.close()
    return delays


async def idle_cpu(conn: Conn, step: float) -> tuple[float, float]:
    """Percent of a core the backend spends in a wait of IDLE_S that finds nothing."""
    pid = await conn.fetchval("SELECT pg_backend_pid()")
    shares = []
    for query in (
        "SELECT * FROM jobrouter_await_settled('[\"none\"]', '[\"failed\"]', $1, $2)",
        "SELECT jobrouter_await_runnable(0, $1, $2)",
    ):
        before = process_cpu_s(pid)
        await conn.fetch(query, IDLE_S, step)
        shares.append(100 * (process_cpu_s(pid) - before) / IDLE_S)
    return shares[0], shares[1]


async def main(steps: list[float], samples: int) -> None:
    async with fresh_database() as url:
        store, other = await open_store(url), await open_store(url)
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(
                "INSERT INTO jobs (id, owner, idempotency_key, fingerprint, task, input, params, "
                "state, created_at, updated_at, next_run_at) SELECT 'done' || g, 'o', 'k' || g, "
                "'f', 't', '{}', '{}', 'succeeded', 0, 0, 0 FROM generate_series(1, 200) g"
            )
            heard = await notify_delays(url, samples)
            print(f"NOTIFY heard after its commit: {quantiles(heard)}")
            for step in steps:
                delays = await read_delays(store, other, step, samples)
                settled_cpu, runnable_cpu = await idle_cpu(conn, step)
                print(
                    f"step {step * 1000:.0f} ms: waiting read returns after the settle's "
                    f"commit: {quantiles(delays)}; an idle wait's backend CPU: "
                    f"{settled_cpu:.1f}% of a core (settled), {runnable_cpu:.1f}% (runnable)"
                )
        finally:
            await conn.close()
            await store.close()
            await other.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--step", type=float, nargs="+", default=[0.005, 0.002])
    parser.add_argument("--samples", type=int, default=60)
    args = parser.parse_args()
    asyncio.run(main(args.step, args.samples))
