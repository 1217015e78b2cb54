"""A claim as the store tests drive it: one `JobStore.claiming` transaction that takes up to
`limit` jobs and starts the first attempts `first` chooses for the queued ones (the engine's
`_claim_runnable` does the same with its slots and eligibility)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from jobrouter.models import Job
from jobrouter.store.claims import Claimed
from jobrouter.store.jobstore import JobStore
from jobrouter.store.starts import AttemptStart

FirstAttempt = Callable[[Job], Awaitable[AttemptStart | None]]


async def claim_runnable(
    jobs: JobStore,
    worker: str,
    claim_s: float,
    limit: int,
    first: FirstAttempt,
    on_claimed: Callable[[list[Claimed]], None],
    wait_s: float = 0.0,
) -> list[Claimed]:
    """The claimed jobs; `on_claimed` hears of them once the claim committed (never when it
    did not)."""
    async with jobs.claiming(worker, claim_s, wait_s) as claim:
        taken = await claim.take(limit)
        starts = {}
        for job in taken:
            start = await first(job)
            if start is not None:
                starts[job.id] = start
        claimed = await claim.start(starts)
    on_claimed(claimed)
    return claimed
