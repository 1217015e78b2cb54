"""Retention: finished jobs, and so their idempotency keys, are kept `[retention] days` (7 by
default, at least 1), then `jobrouter purge` deletes them in small transactions.

Purged: terminal jobs (succeeded, failed, cancelled) last changed before the cutoff, with their
attempts, events and delivered outbox row. Kept: every job that is not terminal (`unknown`
included), and every job whose completion event is not delivered yet (pending, parked for an
owner without a webhook, or dead-lettered). A key submitted again after its job was purged
starts a new job.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from router.store.sql import SqlStore

DAY_S = 86_400.0
DEFAULT_BATCH = 500
MIN_DAYS = 1.0


@dataclass(frozen=True)
class PurgePlan:
    cutoff: float  # epoch seconds: jobs last changed before this are old enough
    purgeable: int
    kept_undelivered: int


def cutoff_for(days: float, now: float | None = None) -> float:
    if days < MIN_DAYS:
        raise ValueError(f"retention must be at least {MIN_DAYS:g} day, got {days:g}")
    return (time.time() if now is None else now) - days * DAY_S


async def plan_purge(store: SqlStore, cutoff: float) -> PurgePlan:
    purgeable, kept = await store.count_purgeable(cutoff)
    return PurgePlan(cutoff=cutoff, purgeable=purgeable, kept_undelivered=kept)


async def purge(
    store: SqlStore, cutoff: float, *, batch: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
) -> int:  # fmt: skip
    """Delete purgeable jobs `batch` at a time, one short transaction each, so workers never
    wait long for the write lock. `progress(total so far)` after every batch. Returns the total."""
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    total = 0
    while True:
        done = await store.purge_batch(cutoff, batch)
        total += done
        if progress is not None and done:
            progress(total)
        if done < batch:
            return total
        await asyncio.sleep(0)  # let this process's own workers at the database between batches
