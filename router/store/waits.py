"""Open waits for jobs to settle, found by ONE read for all of them: a part of the job store.

`Router.wait` needs to know when a job settles in another process. Listening for it costs more
than it looks on PostgreSQL: the server wakes EVERY listening backend of the database for
each notifying transaction, whatever the channel, and each reads the queue in a transaction of
its own (docs/operations.md): when waiters listened for settled jobs, every listening worker
was woken by each settle too. So a process does not listen for settled jobs: while it has open
waits, one read (`settled_jobs`) every interval finds which of them settled, with their rows,
and wakes their watchers through `Changes` (the waiter reads nothing more). Reading committed
state, the poll cannot miss a settle: it commits before the read and is seen, or after and is
seen by the next.

The reads adapt to the traffic, per process, not per wait (`Cadence`):
- A wait on a job this process drives itself (`near`) is woken by the driver's own commit; it
  is read only every `NEAR_S` as a safety net (the job was settled elsewhere: cancelled by
  another process, taken over after a lost claim).
- Other waits are first read when they are as old as waits have usually been by their settle
  (learnt), then again every `interval` until they settle. With more than BATCH waits open,
  reads are spaced so that each finds about BATCH settles; never more often than `MIN_S`.
So a lone waiter pays little more than one read per job, and a busy process far less than one.

Where the connector can wait on the server (PostgreSQL, router/store/server_waits.py) and at
most BATCH waits of other processes' jobs are open, those are not polled: a read that waits on
the server covers them and returns as soon as one settled (one transaction per settle, a few
milliseconds after it); a wait opened meanwhile gets a read of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from jobrouter.states import JobState
from jobrouter.store.changes import Changes
from jobrouter.store.connector import Connector, Row
from jobrouter.store.rows import job_from_row
from jobrouter.store.server_waits import WaitCalls

log = logging.getLogger("jobrouter.store.waits")

MIN_S = 0.01  # the shortest interval between two reads
MAX_S = 0.25  # the longest, while waits of other processes' jobs are open
MAX_EXPECT_S = 5.0  # the latest first read of a wait (what `expect` learns is bounded by it)
NEAR_S = 1.0  # waits on jobs this process drives: a safety net only
BATCH = 4  # with many waits open, a read is meant to find about this many settled
RATE_WEIGHT = 0.2  # of the newest read in the smoothed settle rate
SETTLED = json.dumps(sorted(state.value for state in JobState if state.settled))


@dataclass
class Wait:
    """One open wait. `near`: the job is driven in this process (its settle is heard here)."""

    job_id: str
    near: bool = False
    opened: float = field(default_factory=time.monotonic)
    reads: int = 0  # reads that looked for this job (0: the first is still to come)
    found: bool = False  # a waiting read brought its settle: its waiter is about to close it


@dataclass
class Cadence:
    """When to read next. `expect`: the age by which a wait has usually settled, learnt from
    first reads (once per read: a quarter longer when fewer than two in three of its first
    reads found their job, a tenth shorter otherwise; so about two first reads in three find
    their job, and a wait costs little more than one read);
    `interval`: between the reads of waits already looked at once (with few waits open, at
    least a quarter of `expect`, at most MAX_S), short while reads find settles, growing while
    they do not."""

    expect: float = MIN_S
    interval: float = MIN_S
    rate: float = 0.0  # settles found per second, smoothed

    def due(self, waits: Mapping[int, Wait], last: float) -> float:
        """The time of the next read (monotonic), `last` the time of the previous one."""
        far = [w for w in waits.values() if not w.near]
        if not far:
            return last + NEAR_S
        fresh = min((w.opened + self.expect for w in far if w.reads == 0), default=float("inf"))
        many = len(far) > BATCH
        # Few waits open: a wait that missed is looked at again after a quarter of the usual
        # age; many: the reads are spaced so that each finds about BATCH settles.
        again = last + (self.interval if many else max(self.interval, min(self.expect / 4, MAX_S)))
        need = min(fresh, again if any(w.reads for w in far) else float("inf"))
        gap = BATCH / self.rate if many and self.rate > 0 else MIN_S
        return max(need, last + min(max(gap, MIN_S), MAX_S))

    def learn(self, read: list[Wait], settled: set[str], since: float) -> None:
        """After a read of `read` that found `settled`, `since` seconds after the one before."""
        if since > 0:
            self.rate += RATE_WEIGHT * (len(settled) / since - self.rate)
        # One step per read, by its first reads' hit ratio: a step per wait would let one read
        # of 64 fresh waits that mostly missed multiply `expect` by 1.25**50, straight to
        # MAX_EXPECT_S, and the next all-fresh waits would go unread for that long (a 5 s
        # stall of every waiter, measured at c=64 on PostgreSQL).
        first = [wait for wait in read if wait.reads == 1]
        if first:
            hits = sum(wait.job_id in settled for wait in first)
            self.expect *= 0.9 if 3 * hits >= 2 * len(first) else 1.25
        self.expect = min(max(self.expect, MIN_S), MAX_EXPECT_S)
        self.interval = MIN_S if settled else min(self.interval * 1.5, MAX_S)


class Waits:
    """This process's open waits and the readers that look for their settles."""

    def __init__(self, connector: Connector, changes: Changes) -> None:
        self.connector = connector
        self._q = connector.queries
        self._changes = changes
        self._waits: dict[int, Wait] = {}
        self._cadence = Cadence()
        self._waits_kick: asyncio.Event | None = None
        self._waits_task: asyncio.Task[None] | None = None
        self._wait_calls = self._wait_calls_for(connector)  # reads that wait on the server

    @contextmanager
    def awaiting(self, job_id: str) -> Iterator[Wait]:
        """Look for the job's settle from now on; set `near` on the handle while this process
        drives the job. Enter `watching(job_id)` first: the settle wakes that watcher."""
        wait = Wait(job_id)
        self._waits[id(wait)] = wait
        self._kick_waits()
        try:
            yield wait
        finally:
            del self._waits[id(wait)]
            if not self._waits and self._waits_kick is not None:
                self._waits_kick.set()  # the reader ends at once

    async def stop(self) -> None:
        if self._waits_task is not None:
            self._waits_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._waits_task
        await self._wait_calls.stop()

    def _wait_calls_for(self, connector: Connector) -> WaitCalls:
        def found(rows: list[Row]) -> None:
            ids = {str(row["id"]) for row in rows}
            for wait in self._waits.values():
                wait.found = wait.found or wait.job_id in ids
            for row in rows:
                self._changes.notify(str(row["id"]), job_from_row(row))

        def ended() -> None:
            if self._waits_kick is not None:
                self._waits_kick.set()

        return WaitCalls(connector, self._q, SETTLED, found, ended)

    def _polled(self) -> dict[int, Wait]:
        """The open waits that the polled reads look for: all of them, or, where the
        connector waits on the server and few waits of other processes' jobs are open, only
        the waits of jobs driven here (those others get waiting reads, started here)."""
        calls = self._wait_calls
        far = {key: w for key, w in self._waits.items() if not w.near and not w.found}
        if not calls.usable or len(far) > BATCH:
            return dict(self._waits)
        covered = calls.covered()
        fresh = {key: w for key, w in far.items() if key not in covered}
        for wait in fresh.values():
            wait.reads += 1
        calls.cover((key, w.job_id) for key, w in fresh.items())
        return {key: w for key, w in self._waits.items() if w.near}

    def _kick_waits(self) -> None:
        """Start the reader if it is not running; make it look at its schedule again."""
        if self._waits_kick is None:
            self._waits_kick = asyncio.Event()
        self._waits_kick.set()
        if self._waits_task is None or self._waits_task.done():
            self._waits_task = asyncio.get_running_loop().create_task(
                self._read_waits(), name="jobrouter-waits"
            )

    async def _read_waits(self) -> None:
        kick = self._waits_kick
        assert kick is not None
        last = time.monotonic()
        while self._waits or self._wait_calls.running:
            kick.clear()
            polled = self._polled()
            pause = self._cadence.due(polled, last) - time.monotonic() if polled else None
            if pause is None or pause > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(pause):
                        await kick.wait()
                continue  # look at the schedule again: a kick may bring an earlier wait
            since, last = time.monotonic() - last, time.monotonic()
            try:
                await self._read_settled(list(polled.values()), since)
            except Exception:  # a database away: the waiters' own timeouts read again
                log.warning("reading the settled jobs of open waits failed", exc_info=True)
                self._cadence.interval = MAX_S

    async def _read_settled(self, waits: list[Wait], since: float) -> None:
        for wait in waits:
            wait.reads += 1
        ids = json.dumps(sorted({w.job_id for w in waits}))
        rows = await self.connector.fetchall(
            self._q["settled_jobs"], {"ids": ids, "states": SETTLED}
        )
        settled = {str(row["id"]) for row in rows}
        self._cadence.learn([w for w in waits if not w.near], settled, since)
        for row in rows:
            self._changes.notify(str(row["id"]), job_from_row(row))
