"""What the live watch costs a job (issue 27: at most 0.1 ms of CPU): the attempt's finish with
its verdict against the same finish without, on a real SQLite file, and the leader's fold of
those verdicts. `python -m tests.bench.live_watch_cost [--jobs N] [--rounds R]`.

CPU time is the process's (`time.process_time`: the event loop and aiosqlite's thread), per
finish, for the finishes only (the jobs and attempts are made before the clock starts): in each
round the two variants alternate finish by finish (which goes first alternates by round), so
that a busy machine and the growing file weigh on both alike; a round's figure for each is
the median of its finishes. The added cost is the median of the rounds' differences, with its
quartiles (`--jobs 200 --rounds 20` on a loaded machine)."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from jobrouter.config import WatchConfig
from jobrouter.models import AttemptUsage
from jobrouter.store import SqlStore, open_store
from jobrouter.store.live_watch import LiveVerdict
from jobrouter.watch import fold_backlog
from tests.support.outbox_jobs import new_job


async def started_attempts(store: SqlStore, prefix: str, count: int) -> list[str]:
    ids = []
    for i in range(count):
        job = await new_job(store, key=f"{prefix}-{i}")
        _, attempt = await store.jobs.start_attempt(
            job.id, provider="a", model=None, worker="w", lease_s=60, exclusive=False
        )
        ids.append(attempt.id)
    return ids


async def finish_round(store: SqlStore, ids: list[str], first_watched: bool) -> tuple[float, float]:
    """CPU seconds of one finish (the median of the round's) without and with a verdict: the
    two alternate finish by finish, so a machine whose load changes weighs on both alike, and
    the median leaves out the finishes a busy machine preempted."""
    spent: tuple[list[float], list[float]] = ([], [])
    for index, attempt_id in enumerate(ids):
        with_verdict = (index % 2 == 0) == first_watched
        verdict = None
        if with_verdict:
            verdict = LiveVerdict(
                attempt_id, "a", "caption", failed=False, prompt_tokens=120, prompt_chars=480
            )
        began = time.process_time()
        await store.jobs.finish_attempt_cas(
            attempt_id, {"text": "tea"}, AttemptUsage(), verdict=verdict
        )
        spent[with_verdict].append(time.process_time() - began)
    return statistics.median(spent[False]), statistics.median(spent[True])


async def measure(jobs: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(f"sqlite:///{Path(folder) / 'bench.db'}")
        try:
            plain: list[float] = []
            watched: list[float] = []
            for round_ in range(rounds):
                ids = await started_attempts(store, str(round_), 2 * jobs)
                without, with_ = await finish_round(store, ids, round_ % 2 == 0)
                plain.append(without)
                watched.append(with_)
            import jobrouter.contracts  # noqa: F401  (a leader has it loaded: not the fold's cost)

            began = time.process_time()
            folded = await fold_backlog(store.certifications, WatchConfig(), lambda: None)
            fold_s = (time.process_time() - began) / max(folded, 1)
        finally:
            await store.close()
    p, w = statistics.median(plain), statistics.median(watched)
    added = sorted((b - a) * 1000 for a, b in zip(plain, watched, strict=True))
    low, mid, high = statistics.quantiles(added, n=4) if rounds > 1 else (added[0],) * 3
    print(f"finish without a verdict: {p * 1000:.3f} ms CPU/job (median of {rounds} rounds)")
    print(f"finish with its verdict:  {w * 1000:.3f} ms CPU/job")
    print(
        f"added on the job's path:  {mid:.3f} ms CPU/job, median of the rounds' differences "
        f"(quartiles {low:.3f} to {high:.3f}; all: {added[0]:.3f} to {added[-1]:.3f})"
    )
    print(f"the leader's fold:        {fold_s * 1000:.3f} ms CPU/verdict ({folded} verdicts)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=500, help="finishes per round and variant")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(measure(args.jobs, args.rounds))


if __name__ == "__main__":
    main()
