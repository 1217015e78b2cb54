"""Retention: finished jobs, and so their idempotency keys, are kept `[retention] days` (7 by
default, at least 1), then `jobrouter purge` deletes them in small transactions.

Purged: terminal jobs (succeeded, failed, cancelled) last changed before the cutoff, with their
attempts, events and outbox row. Kept: every job that is not terminal (`unknown` included), and
every job whose completion event may still be owed: undelivered (pending or retrying) for an
owner with a `[webhooks.<owner>]` section, undelivered and already tried or claimed (whatever
the configuration says now), or a dead letter. An event parked for an owner without a webhook
(never tried) holds its job back too, unless `drop_parked` (the explicit `--drop-parked`): then
it is deleted with its job, and counted. The owners with a webhook are passed in (`owners`,
e.g. the config's `webhooks` mapping). A key submitted again after its job was purged starts a
new job.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from jobrouter.store.outbox import OutboxStore, Purged

DAY_S = 86_400.0
DEFAULT_BATCH = 500
MIN_DAYS = 1.0


@dataclass(frozen=True)
class PurgePlan:
    cutoff: float  # epoch seconds: jobs last changed before this are old enough
    purgeable: int
    kept_undelivered: int  # completion still owed to a configured webhook, or a dead letter
    parked: int  # of the purgeable, those whose parked event (owner without a webhook) goes too


def cutoff_for(days: float, now: float | None = None) -> float:
    if days < MIN_DAYS:
        raise ValueError(f"retention must be at least {MIN_DAYS:g} day, got {days:g}")
    return (time.time() if now is None else now) - days * DAY_S


async def plan_purge(
    store: OutboxStore, cutoff: float, *, owners: Iterable[str], drop_parked: bool = False
) -> PurgePlan:
    """What `purge` would delete now; `owners` are the owners with a webhook."""
    counts = await store.count_purgeable(cutoff, owners=owners, drop_parked=drop_parked)
    return PurgePlan(
        cutoff=cutoff,
        purgeable=counts.purgeable,
        kept_undelivered=counts.kept_undelivered,
        parked=counts.parked,
    )


async def purge(
    store: OutboxStore,
    cutoff: float,
    *,
    owners: Iterable[str],
    batch: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
    drop_parked: bool = False,
) -> Purged:
    """Delete purgeable jobs `batch` at a time, one short transaction each, so workers never
    wait long for the write lock. `owners` are the owners with a webhook: their undelivered
    events keep their jobs, and so does every event already tried; with `drop_parked`, never
    tried events of the others go with their jobs. `progress(jobs so far)` after every batch.
    Returns the totals: jobs, and parked events dropped with them."""
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    # read once, so a one-shot iterable serves every batch (a str is one owner, not its letters)
    wanted = [owners] if isinstance(owners, str) else sorted(set(owners))
    jobs = parked = 0
    while True:
        done = await store.purge_batch(cutoff, batch, owners=wanted, drop_parked=drop_parked)
        jobs += done.jobs
        parked += done.parked
        if progress is not None and done.jobs:
            progress(jobs)
        if done.jobs < batch:
            return Purged(jobs=jobs, parked=parked)
        await asyncio.sleep(0)  # let this process's own workers at the database between batches
