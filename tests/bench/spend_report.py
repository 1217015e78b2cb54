"""What a spend report costs (issue 29), with and without its index (`attempts_by_started`,
migration 0022): a store filled with JOBS finished jobs of one attempt each, started evenly
over the last DAYS days in the order they were written, of OWNERS owners, 3 tasks and 2
providers (one in ten attempts of unknown cost); then `Router.spend`'s read of this UTC
month, by owner and for one owner, timed as the median of ROUNDS reads, before and after the
index is dropped.

    python -m tests.bench.spend_report --url sqlite:///spend.db --jobs 200000
    python -m tests.bench.spend_report --url postgresql://postgres@127.0.0.1:5432/bench

The database must be new (the fill writes rows with SQL of its own, in one statement per
table, for speed: the store's own path is not what is measured here).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from jobrouter.spend_report import spend, spend_query
from jobrouter.store import SqlStore, open_store

DAY_S = 86_400
SQLITE_FILL = """
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < :jobs)
INSERT INTO {table} ({names}) SELECT {values} FROM n
"""
POSTGRES_FILL = (
    "INSERT INTO {table} ({names}) SELECT {values} FROM generate_series(0, :jobs - 1) AS n(i)"
)
# In time order, as attempts are written: the i-th of :jobs started (1 - i / :jobs) of :days ago.
STARTED = ":now - (:jobs - i) * (:days * 86400.0 / :jobs)"
UNKNOWN = "i % 10 = 0"  # one attempt in ten: its cost unknown
JOB = {
    "id": "printf('j%09d', i)",
    "owner": "'owner-' || (i % :owners)",
    "idempotency_key": "'k' || i",
    "fingerprint": "'f'",
    "task": "'task-' || (i % 3)",
    "input": "'{}'",
    "params": "'{}'",
    "state": "'succeeded'",
    "created_at": STARTED,
    "updated_at": STARTED,
    "next_run_at": "0",
}
ATTEMPT = {
    "id": "printf('a%09d', i)",
    "job_id": "printf('j%09d', i)",
    "seq": "1",
    "provider": "'provider-' || (i % 2)",
    "state": "'succeeded'",
    "started_at": STARTED,
    "finished_at": STARTED,
    "prompt_tokens": "40",
    "completion_tokens": "8",
    "cost_usd": f"CASE WHEN {UNKNOWN} THEN NULL ELSE 0.000048 END",
    "cost_source": f"CASE WHEN {UNKNOWN} THEN NULL ELSE 'config' END",
    "cost_unknown": f"CASE WHEN {UNKNOWN} THEN 'no price' ELSE NULL END",
}


def postgres(columns: str) -> str:
    return columns.replace("printf('j%09d', i)", "'j' || lpad(i::text, 9, '0')").replace(
        "printf('a%09d', i)", "'a' || lpad(i::text, 9, '0')"
    )


async def fill(store: SqlStore, jobs: int, owners: int, days: int) -> None:
    params = {"jobs": jobs, "owners": owners, "days": days, "now": time.time()}
    sqlite = store.connector.dialect == "sqlite"
    for table, columns in (("jobs", JOB), ("attempts", ATTEMPT)):
        values = ", ".join(columns.values())
        text = (SQLITE_FILL if sqlite else POSTGRES_FILL).format(
            table=table, names=", ".join(columns), values=values if sqlite else postgres(values)
        )
        async with store.connector.write() as tx:
            await tx.execute(text, params)


async def timed(store: SqlStore, rounds: int, **query: str) -> tuple[float, int]:
    """The median milliseconds of a report's read, and its attempts (the same every round)."""
    times, seen = [], 0
    for _ in range(rounds):
        began = time.perf_counter()
        report = await spend(store.spend_reads, spend_query(**query))
        times.append((time.perf_counter() - began) * 1000)
        seen = report.total.attempts
    return statistics.median(times), seen


async def main(url: str, jobs: int, owners: int, days: int, rounds: int) -> None:
    store = await open_store(url)
    try:
        began = time.perf_counter()
        await fill(store, jobs, owners, days)
        print(f"filled {jobs} jobs and attempts in {time.perf_counter() - began:.1f} s")
        for label in ("with attempts_by_started", "without it"):
            by_owner = await timed(store, rounds, by="owner")
            one = await timed(store, rounds, by="task,day", owner="owner-1")
            print(
                f"{label}: this month by owner {by_owner[0]:.1f} ms ({by_owner[1]} attempts); "
                f"owner-1 by task and day {one[0]:.1f} ms ({one[1]} attempts)"
            )
            async with store.connector.write() as tx:
                await tx.execute("DROP INDEX IF EXISTS attempts_by_started", {})
    finally:
        await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--owners", type=int, default=50)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main(args.url, args.jobs, args.owners, args.days, args.rounds))
