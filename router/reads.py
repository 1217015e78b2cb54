"""`Router`'s reads: a job, its attempts and events, listings and counts, watching and waiting
for a job, spend. What the edges (HTTP, console, CLI) read, they read here, never from the
store: `Router` is the boundary (tests/unit/test_edge_boundary.py).

A part of `Router` (jobrouter.api), not a door of its own: `Router` inherits it, and it reads
only what `Router` holds (`RouterParts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from jobrouter.aio import wait_event
from jobrouter.config import RouterConfig
from jobrouter.errors import AttemptNotFound, JobNotFound, RouterClosed, WaitTimeout
from jobrouter.listing import JobFilter, JobPage
from jobrouter.models import Attempt, BudgetUse, Job, JobEvent, SpendReport
from jobrouter.spend_report import By, Moment, budget_uses, spend, spend_query
from jobrouter.states import JobState, watch_ends
from jobrouter.store import SqlStore
from jobrouter.tasks import TaskRuntime

if TYPE_CHECKING:
    from jobrouter.build import ProvidersOnUse
    from jobrouter.engine import Engine
    from jobrouter.leader import Leader

# `wait` reads a job itself only after this long without news (the store's one read for all
# open waits finds settles; this is a safety net), and looks again whether the job is still
# driven here every WAIT_RECHECK_S.
WAIT_POLL_S = 5.0
WAIT_RECHECK_S = 1.0


class RouterParts:
    """What `Router` holds, as its parts (this module, jobrouter.operations) read it."""

    store: SqlStore
    config: RouterConfig
    tasks: Mapping[str, TaskRuntime]
    engine: Engine | None
    providers: ProvidersOnUse
    leader: Leader | None
    _closed: bool

    def _check_open(self) -> None:
        if self._closed:
            raise RouterClosed()


class JobReads(RouterParts):
    async def get(self, job_id: str) -> Job:
        self._check_open()
        job = await self.store.jobs.get_job(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    async def visible_job(self, job_id: str, *, to: str | None) -> Job:
        """The job if the owner `to` may see it (None: an operator, who sees every job);
        another owner's job is `JobNotFound`, not forbidden, so ids of other owners cannot
        be probed."""
        self._check_open()
        job = await self.store.jobs.get_job(job_id)
        if job is None or (to is not None and job.owner != to):
            raise JobNotFound(job_id)
        return job

    async def attempt(self, attempt_id: str) -> Attempt:
        self._check_open()
        attempt = await self.store.jobs.get_attempt(attempt_id)
        if attempt is None:
            raise AttemptNotFound(attempt_id)
        return attempt

    async def list_jobs(
        self, where: JobFilter, *, limit: int, cursor: str | None = None
    ) -> JobPage:
        """One page of the jobs `where` selects, newest first, after `cursor`; `ListingError`
        for a cursor or limit that cannot be answered."""
        self._check_open()
        return await self.store.jobs.list_jobs(where, limit=limit, cursor=cursor)

    async def count_jobs_by_state(self, where: JobFilter) -> dict[JobState, int]:
        """How many jobs `where` selects in each state (every state present, zeros included)."""
        self._check_open()
        return await self.store.jobs.count_jobs_by_state(where)

    async def find(self, owner: str, idempotency_key: str) -> Job | None:
        self._check_open()
        return await self.store.jobs.find_job(owner, idempotency_key)

    async def find_everywhere(self, idempotency_key: str, limit: int = 50) -> list[Job]:
        """The jobs of every owner under `idempotency_key` (a key is owner-scoped: one job
        per owner), newest first: an operator's search. No index leads with the key, so this
        walks the jobs table; `find` is the one to call per job."""
        self._check_open()
        where = JobFilter(idempotency_key=idempotency_key)
        return list((await self.store.jobs.list_jobs(where, limit=limit)).items)

    async def attempts(self, job_id: str) -> list[Attempt]:
        self._check_open()
        return await self.store.jobs.list_attempts(job_id)

    async def events(self, job_id: str, after: int = 0) -> list[JobEvent]:
        self._check_open()
        return await self.store.jobs.list_events(job_id, after)

    async def watch(
        self, job_id: str, after: int = 0, poll: float = 0.25
    ) -> AsyncIterator[JobEvent]:
        """Every event after `after`, stored ones first, then new ones as they happen; ends
        where `watch_ends` says: on the event that makes the job terminal, or once caught up
        with a job that needs attention (never on an attempt's own end)."""
        await self.get(job_id)
        await self.store.jobs.follow_events()
        with self.store.jobs.watching(job_id) as changed:
            while True:
                changed.take()  # what follows reads everything up to now
                # The job first, then its events: they include every change up to that state,
                # so the last state they announce (else the job's) is where the job is now.
                latest = (await self.get(job_id)).state
                for event in await self.store.jobs.list_events(job_id, after):
                    after, latest = event.seq, event.kind.job_state or latest
                    yield event
                    if watch_ends(event.kind.job_state, caught_up=False):
                        return
                if watch_ends(latest, caught_up=True):
                    return
                await wait_event(changed.event, poll)

    # The API names it `timeout`; it bounds the wait, as asyncio.wait_for's does.
    async def wait(self, job_id: str, timeout: float | None = None) -> Job:  # noqa: ASYNC109
        """The job once it is terminal or needs attention; `WaitTimeout` (a `TimeoutError`)
        if not by `timeout`.

        Reads the job only when it may have changed out of sight: a job just created here is
        known as committed, a change made here comes with the job, and other processes'
        changes are found by the store's one read for all open waits (router/store/waits.py),
        which brings the settled job's row. Nothing is LISTENed for: on PostgreSQL every
        notification costs every listening backend a transaction."""
        self._check_open()  # else a closed router's wait would sit out its timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        with (
            self.store.jobs.watching(job_id) as change,
            self.store.jobs.awaiting(job_id) as looking,
        ):
            job = self.store.jobs.created_here(job_id) or await self.get(job_id)
            while not watch_ends(job.state, caught_up=True):  # the job read is caught up
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise WaitTimeout(job_id=job_id, state=str(job.state), timeout=timeout)
                looking.near = self._driving(job_id)
                # asyncio.timeout, not wait_for: no extra task, one loop turn less per wake-up.
                poll = WAIT_RECHECK_S if looking.near else WAIT_POLL_S
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(poll, left) if left else poll):
                        await change.wait()
                seen = change.take()  # None: changed elsewhere, or nothing heard
                if seen is None and looking.near and self._driving(job_id):
                    continue  # still driven here: its settle is heard here, or read by the store
                job = seen if seen is not None else await self.get(job_id)
            return job

    def _driving(self, job_id: str) -> bool:
        return self.engine is not None and self.engine.is_driving(job_id)

    async def spend(
        self, *, by: By = None, since: Moment = None, until: Moment = None, owner: str | None = None
    ) -> SpendReport:
        """What attempts started at `since` <= t < `until` (default: this UTC month) used, by
        owner, task, provider, day or month (jobrouter.spend_report); SpendQueryInvalid names
        a bad parameter. An unknown cost is counted, never summed as 0."""
        self._check_open()
        query = spend_query(by=by, since=since, until=until, owner=owner)
        return await spend(self.store.spend_reads, query)

    async def budget_uses(self, *, owner: str | None = None) -> list[BudgetUse]:
        """Each configured budget's use this period (with `owner`: that owner's budgets)."""
        self._check_open()
        return await budget_uses(self.store.spend, self.config.budgets, owner=owner)
