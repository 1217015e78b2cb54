"""The console's counts by state, kept a while per filter. The job list refreshes itself every
2 s per open tab; counting is the part of a refresh that may walk many jobs (every job of an
operator's unfiltered view: tens of milliseconds per 10^6, docs/benchmarks.md), so a refresh
reuses counts up to `COUNTS_MAX_AGE_S` old and a page load (or the Filter button) counts anew.
Tabs that need the same counts at once share one count."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from jobrouter.listing import JobFilter
from jobrouter.states import JobState

COUNTS_MAX_AGE_S = 30.0


class JobCounter(Protocol):
    """What counts jobs: the `Router` (the console's), or a store's jobs in a test."""

    async def count_jobs_by_state(self, where: JobFilter) -> dict[JobState, int]: ...


MAX_FILTERS = 256  # filters kept at once (each is a few ints); the oldest go first


@dataclass(frozen=True)
class Counted:
    counts: dict[JobState, int]
    at: float  # epoch seconds: shown beside the counts, so their age is never hidden


class CountsCache:
    def __init__(
        self, max_age_s: float = COUNTS_MAX_AGE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_age_s = max_age_s
        self._clock = clock
        self._kept: OrderedDict[JobFilter, tuple[float, asyncio.Task[Counted]]] = OrderedDict()

    async def counts(self, counter: JobCounter, where: JobFilter, *, fresh: bool) -> Counted:
        """The counts of `where`: counted now when `fresh`, else the kept ones unless they
        are older than `max_age_s` (or their count failed)."""
        kept = self._kept.get(where)
        now = self._clock()
        if fresh or kept is None or now - kept[0] > self.max_age_s or _failed(kept[1]):
            task = asyncio.create_task(_count(counter, where))
            task.add_done_callback(lambda done: self._forget_failed(where, done))
            kept = (now, task)
            self._kept[where] = kept
            self._kept.move_to_end(where)
            while len(self._kept) > MAX_FILTERS:
                self._kept.popitem(last=False)
        # shielded: a tab that goes away does not cancel the count other tabs wait for
        return await asyncio.shield(kept[1])

    def _forget_failed(self, where: JobFilter, done: asyncio.Task[Counted]) -> None:
        if not done.cancelled() and done.exception() is not None:  # retrieved: not lost
            current = self._kept.get(where)
            if current is not None and current[1] is done:
                del self._kept[where]


def _failed(task: asyncio.Task[Counted]) -> bool:
    return task.done() and (task.cancelled() or task.exception() is not None)


async def _count(counter: JobCounter, where: JobFilter) -> Counted:
    return Counted(await counter.count_jobs_by_state(where), time.time())
