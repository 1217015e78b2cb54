"""What an index's upkeep costs a job on the store's path (issue 28), measured in one process:
two SQLite files, the second with `--index` statements run on it, jobs alternating between them
one by one (`create_and_start` with its first attempt, then `finish_attempt_cas` with a live
verdict: a contract task's path). CPU per job (`time.process_time`, every thread) is taken per
job; a round's figure for each file is its median job, the result the median of the rounds'
differences, with its quartiles: the alternation makes a busy machine weigh on both alike.

    python -m tests.bench.index_cost --index jobs_runnable --index jobs_finished

`--index` takes an index's name from OLD (the ones SQLite's migration 0018 dropped) or any SQL;
`--drop NAME` drops an index of today's schema from the first file instead (what the indexes
the listing walks cost: `--drop jobs_by_owner --drop jobs_by_task ...`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from jobrouter.models import AttemptUsage
from jobrouter.store import SqlStore, open_store
from jobrouter.store.live_watch import LiveVerdict
from jobrouter.store.starts import AttemptStart

ANSWER = {"text": "Warm saffron tea for cold evenings."}
USAGE = AttemptUsage(latency_ms=1.0, model="openai/stub", prompt_tokens=40, completion_tokens=5)


def first_start() -> AttemptStart:
    return AttemptStart("stub", "openai/stub", "bench", 30.0, ())


OLD = {  # as migration 0001 made them
    "jobs_runnable": "CREATE INDEX jobs_runnable ON jobs (next_run_at) "
    "WHERE state IN ('queued', 'running')",
    "jobs_finished": "CREATE INDEX jobs_finished ON jobs (updated_at) "
    "WHERE state IN ('succeeded', 'failed', 'cancelled')",
}


async def one_job(store: SqlStore, key: str) -> float:
    """CPU seconds of one job's store path."""
    began = time.process_time()
    _, attempt = await store.jobs.create_and_start(
        owner="bench",
        idempotency_key=key,
        task="bench",
        input={"product": {"name": f"Saffron tea {key}"}, "tone": "warm"},
        params={},
        deadline_s=60,
        claimed_by="bench",
        claim_s=60,
        first=first_start(),
    )
    assert attempt is not None
    seen = LiveVerdict(attempt.id, "stub", "bench", failed=False, prompt_tokens=40)
    await store.jobs.finish_attempt_cas(attempt.id, ANSWER, USAGE, verdict=seen)
    return time.process_time() - began


async def measure(indexes: list[str], drops: list[str], rounds: int, jobs: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="jobrouter-index-cost-"))
    plain = await open_store(f"sqlite:///{folder / 'a.db'}")
    indexed = await open_store(f"sqlite:///{folder / 'b.db'}")
    for index in indexes:
        async with indexed.connector.write() as tx:
            await tx.execute(OLD.get(index, index), {})
    for index in drops:
        async with plain.connector.write() as tx:
            await tx.execute(f"DROP INDEX {index}", {})
    added = []
    try:
        for store in (plain, indexed):  # warm: statements prepared, pages cached
            for i in range(20):
                await one_job(store, f"warm-{i}")
        for round_ in range(rounds):
            spent: tuple[list[float], list[float]] = ([], [])
            for i in range(2 * jobs):
                with_index = (i % 2 == 0) == (round_ % 2 == 0)
                store = indexed if with_index else plain
                spent[with_index].append(await one_job(store, f"{round_}-{i}"))
            added.append((statistics.median(spent[True]) - statistics.median(spent[False])) * 1e3)
    finally:
        await plain.close()
        await indexed.close()
    added.sort()
    low, mid, high = statistics.quantiles(added, n=4) if rounds > 1 else (added[0],) * 3
    print(
        f"the indexes add {mid:.3f} ms of CPU a job, median of {rounds} rounds "
        f"(quartiles {low:.3f} to {high:.3f}; all: {added[0]:.3f} to {added[-1]:.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--index", action="append", default=[], help="a name of OLD, or SQL run on the second file"
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--jobs", type=int, default=300, help="jobs per round and file")
    parser.add_argument("--drop", action="append", default=[], help="dropped from the first file")
    args = parser.parse_args()
    asyncio.run(measure(args.index, args.drop, args.rounds, args.jobs))


if __name__ == "__main__":
    main()
