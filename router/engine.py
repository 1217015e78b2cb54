"""The engine: worker tasks inside the process that opened the router.

A job submitted here is created already claimed by this process and handed to a local worker
(no polling on the hot path). Jobs of other processes, jobs parked until a provider recovers,
and jobs of a crashed process once their claim has expired are found by the claim loop
(`_poll`, paced by router/pace.py: on PostgreSQL its claim waits on the server, on SQLite it
polls). A heartbeat renews this process's claims and attempt leases. Turning attempts whose
lease expired (their worker died) into `unknown` (I7) is periodic work, run by one leader
(router/periodic.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from jobrouter.aio import stop_if_cancelled, wait_event
from jobrouter.door import NewJob
from jobrouter.driver import JobDriver
from jobrouter.errors import BudgetUnheld
from jobrouter.health import ProviderHealth
from jobrouter.models import Attempt, Job
from jobrouter.pace import Pace
from jobrouter.persist import persist
from jobrouter.policy import Eligibility
from jobrouter.providers import CompletionRequest, Provider
from jobrouter.slots import Reservation, Slots
from jobrouter.spending import Spending
from jobrouter.states import JobState
from jobrouter.step import Step, decide_step, next_step
from jobrouter.store.claims import Claimed
from jobrouter.store.jobstore import JobStore
from jobrouter.store.starts import AttemptStart
from jobrouter.tasks import TaskRuntime
from jobrouter.timing import AttemptLimits, Deadline
from jobrouter.worker import InHand, MetricFn, Worker

log = logging.getLogger("jobrouter.engine")
CREATE_WAIT_S = 15.0  # a commit may wait up to SQLite's 10 s busy timeout for another process


@dataclass(frozen=True)
class EngineSettings:
    workers: int = 64  # jobs driven at once by this process
    claim_s: float = 60.0  # how long a job stays with a process that stops heart-beating
    lease_s: float = 30.0  # grace on top of an attempt's timeout before it counts as abandoned
    poll_s: float = 0.5  # how often to look for jobs of other processes or parked jobs


@dataclass(frozen=True)
class Launch:
    """A first attempt this process is about to commit (with the job it creates, or in a
    claim), on the `slot` reserved for it; `request`: the provider request when the door built
    it (else its driver builds it). Kept by the attempt's id until the commit hands it over."""

    first: AttemptStart
    slot: Reservation
    request: CompletionRequest | None = None


def make_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Engine:
    def __init__(
        self,
        store: JobStore,
        tasks: Mapping[str, TaskRuntime],
        providers: Mapping[str, Provider],
        *,
        settings: EngineSettings,
        health: ProviderHealth,
        provider_timeouts: Mapping[str, float] | None = None,
        metric: MetricFn,
        spending: Spending,
    ) -> None:
        self.store = store
        self.tasks = dict(tasks)
        self.providers = dict(providers)
        self.settings = settings
        self.worker_id = make_worker_id()
        self.health = health
        self.spending = spending
        limits = AttemptLimits(dict(provider_timeouts or {}), settings.lease_s)
        self.worker = Worker(self.worker_id, limits, settings.poll_s, InHand(), metric)
        self._queue: asyncio.Queue[Claimed] = asyncio.Queue()
        self._queued: set[str] = set()  # ids in _queue: claimed, not yet driven
        self._active: dict[str, asyncio.Task[None]] = {}
        self._slots = Slots(settings.workers)
        self._loops: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()  # set by `wake`: claim now
        self._stopping = False
        self._launches: dict[str, Launch] = {}  # by attempt id: first attempts being committed
        store.hand_over_to(self)

    async def create(self, new: NewJob) -> Job:
        """Create `new` claimed by this process: with its first attempt when it can start at
        once (`_first_launch`); once committed the job goes to a driver here (`committed`). A
        slot reserved for it and not handed over (the job already existed, or nothing was
        committed) is free again when this returns or raises."""
        launch = await self._first_launch(new)
        try:
            job = await new.create_in(
                self.store,
                claimed_by=self.worker_id,
                claim_s=self.settings.claim_s,
                first=launch.first if launch else None,
            )
        finally:
            if launch is not None:
                self._give_back([launch.first])
        return job

    async def _first_launch(self, new: NewJob) -> Launch | None:
        """How a job this process is about to create starts. When it can start at once (a
        worker slot is free, and the policy picks a provider whose circuit is closed) its first
        attempt goes in the creating transaction, with the slot reserved for it. Otherwise
        (None) the job is created queued and goes the usual way: a half-open circuit's probe,
        for one, is claimed in a transaction of its own; a failed read of the eligibility never
        stops a job from being accepted."""
        if self._stopping or not self._loops or self._slots.full:
            return None  # not started yet (warming up) or stopping: the job goes queued
        deadline = Deadline.new(new.task, time.time())
        try:
            step = await next_step(self.health, new.task, [], deadline)
        except Exception:
            log.exception(
                "eligibility for task %s unknown: the job is created queued", new.task.name
            )
            return None
        first = self._first_start(new.task, step, deadline, new.owner, new.request)
        return await self._launch(first, new.request) if first is not None else None

    async def _launch(
        self, first: AttemptStart, request: CompletionRequest | None
    ) -> Launch | None:
        """`first` on a slot reserved for it, kept until its commit hands it over; None: all
        slots taken while the eligibility was read, or stopping."""
        slot = None if self._stopping else await self._slots.reserve()
        if slot is None:
            return None
        launch = Launch(first, slot, request)
        self._launches[first.id] = launch
        return launch

    def _give_back(self, firsts: list[AttemptStart]) -> None:
        """The slots of first attempts never handed over (not committed, the job already there,
        a budget refused the start): free again. A slot handed over stays with its driver."""
        for first in firsts:
            launch = self._launches.pop(first.id, None)
            if launch is not None:
                launch.slot.give_back()

    def _first_start(
        self,
        task: TaskRuntime,
        step: Step,
        deadline: Deadline,
        owner: str,
        request: CompletionRequest | None = None,
    ) -> AttemptStart | None:
        """The first attempt of `owner`'s job of `task` when the step starts one at once (see
        `Step.start_at_once`), with the step's refusals to record with it and the worst case
        it reserves. A start a budget covers needs the job's `request` to size its worst case
        (a claim has none: its driver builds it and starts the job) and is left to the driver
        when a budget cannot hold it (the driver records why)."""
        provider = step.start_at_once()
        if provider is None:
            return None
        reservation = None
        if self.spending.covers(owner, task.name, (provider,)):
            if request is None:
                return None
            try:
                reservation = self.spending.reservation(
                    owner=owner, task=task.name, provider=provider, request=request
                )
            except BudgetUnheld:
                return None
        return AttemptStart(
            provider,
            self.providers[provider].model,
            self.worker_id,
            self.worker.limits.lease_s(task, provider, deadline),
            tuple(step.refusals()),
            reservation,
        )

    def committed(self, job: Job, attempt: Attempt | None) -> None:
        """The store's hand-over (router/store/handoff.py), after the COMMIT of a job created
        here or claimed, even if the call that wrote it was cancelled meanwhile: a job committed
        with the first attempt launched for it is driven at once on its slot; another is queued
        for a driver, unless one here has it already (a claim renewed)."""
        launch = self._launches.pop(attempt.id, None) if attempt is not None else None
        if launch is not None and attempt is not None:
            self._active[job.id] = asyncio.create_task(
                self._drive(job, attempt, launch.first, launch.request), name=f"job-{job.id}"
            )
            launch.slot.handed_over()
        elif job.id not in self._active:  # not queued again (the dispatcher would skip it)
            self.hand_over(job)

    async def take_up(self, job: Job) -> None:
        """A job found under its key, not settled: when this process holds its claim (or the
        claim expired) and drives nothing of it, drive it. Its creator may be this process,
        whose COMMIT acknowledgement was lost (so nobody drives it), or one that crashed."""
        if self.is_driving(job.id):
            return
        claimed = await persist(
            lambda: self.store.claim(job.id, self.worker_id, self.settings.claim_s)
        )
        if claimed is not None and not self.is_driving(job.id):
            self.hand_over(claimed)

    async def _claim_eligibility(self) -> dict[str, dict[str, Eligibility]]:
        """The eligibility of every task that may repeat, read inside a claiming transaction
        once its wait on the server is over (one read before it would miss what changed while
        it waited; the gate caches it, so this seldom does I/O). Exclusive tasks are left to
        their drivers."""
        eligibility: dict[str, dict[str, Eligibility]] = {}
        for name, task in self.tasks.items():
            if task.policy.exclusive:
                continue
            try:
                eligibility[name] = await self.health.eligibility(task)
            except Exception:
                log.exception("eligibility for task %s unknown: its driver decides", name)
        return eligibility

    def is_driving(self, job_id: str) -> bool:
        return job_id in self._active or job_id in self._queued

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self.store.track_load(lambda: len(self._active) + self._queue.qsize())
        self._loops = [
            asyncio.create_task(self._dispatch(), name="jobrouter-dispatch"),
            asyncio.create_task(self._poll(), name="jobrouter-poll"),
            asyncio.create_task(self._heartbeat(), name="jobrouter-heartbeat"),
        ]  # the sweep of expired leases is periodic work: the leader runs it (router/periodic.py)

    async def stop(self, grace_s: float = 0.0) -> None:
        """Stop taking work, let jobs in hand finish for up to `grace_s`, then stop them: an
        attempt still in flight is recorded `unknown`, never failed. Submits still committing
        finish first: a job they create here is then stopped like the others."""
        self._stopping = True
        for loop in self._loops:
            loop.cancel()
        with contextlib.suppress(TimeoutError):  # not wait_for: it can lose a cancel (aio.py)
            async with asyncio.timeout(CREATE_WAIT_S):
                await self._slots.settled()
        if grace_s > 0 and self._active:
            await asyncio.wait(list(self._active.values()), timeout=grace_s)
        drivers = list(self._active.values())
        for driver in drivers:
            driver.cancel()
        await asyncio.gather(*self._loops, *drivers, return_exceptions=True)
        self._loops.clear()

    def hand_over(self, job: Job) -> None:
        """A job this process created (and holds the claim of) goes straight to a worker."""
        self._enqueue(Claimed(job))

    def _enqueue(self, claimed: Claimed) -> None:
        self._queued.add(claimed.job.id)
        self._queue.put_nowait(claimed)

    def interrupt(self, job_id: str) -> None:
        """The job was cancelled: stop its driver here (its attempts are already cancelled)."""
        driver = self._active.get(job_id)
        if driver is not None:
            driver.cancel()

    def wake(self) -> None:
        """Claim now: a job this process made runnable again (reopened, a lease expired)."""
        self._wake.set()

    # ---- loops ---------------------------------------------------------------------------------

    async def _dispatch(self) -> None:
        while True:
            claimed = await self._queue.get()
            job = claimed.job
            if job.id not in self._active:
                await self._slots.take()  # still in _queued meanwhile: its claim is renewed
                self._active[job.id] = asyncio.create_task(
                    self._drive(job, claimed.attempt, claimed.first), name=f"job-{job.id}"
                )
            self._queued.discard(job.id)

    async def _drive(
        self,
        job: Job,
        started: Attempt | None = None,
        first: AttemptStart | None = None,
        request: CompletionRequest | None = None,
    ) -> None:
        try:
            task = self.tasks.get(job.task)
            if task is None:
                log.error(
                    "job %s has task %r, which this router does not configure", job.id, job.task
                )
                await self.store.release(job.id, self.worker_id, self.settings.claim_s)
                return
            await JobDriver(
                job,
                task,
                store=self.store,
                health=self.health,
                providers=self.providers,
                worker=self.worker,
                spending=self.spending,
                started=started,
                noted=first.notes if first else (),
                request=request,
            ).run()
        except asyncio.CancelledError:
            raise
        except Exception:  # keep the worker alive; the claim expires and the job is retried
            log.exception("driving job %s failed; it will be picked up again", job.id)
        finally:
            self._active.pop(job.id, None)
            self._slots.release()

    async def _poll(self) -> None:
        """Claim at the pace of router/pace.py: where claims can wait on the server
        (PostgreSQL) a quiet worker's claim waits there for a job, else it claims every
        `poll_s`; `wake` claims at once, and a busy worker claims every BUSY_POLL_S."""
        wait_s = self.store.claim_wait_s(self.settings.poll_s)
        quiet = Pace.AWAIT if wait_s > 0 else Pace.POLL
        mode, rest = quiet, False
        while True:
            stop_if_cancelled()
            await wait_event(self._wake, mode.timeout(self.settings.poll_s, rest))
            self._wake.clear()
            try:
                claimed = await self._claim_runnable(wait_s if mode is Pace.AWAIT else 0.0)
                rest = claimed < 0
                mode = mode.after(claimed, quiet)
            except Exception:
                rest = True
                log.exception("polling for runnable jobs failed")

    async def _claim_runnable(self, wait_s: float = 0.0) -> int:
        """Claim what is free and start the first attempts of the queued jobs among it, in
        one transaction (`JobStore.claiming`; `wait_s`: waiting on the server first for a job).
        Each such attempt has its slot reserved as `create`'s does: `stop` waits for them, and
        the store's hand-over drives them once committed (`committed`)."""
        if self._free() <= 0:
            return -1  # full: nothing claimed, but not for want of jobs
        firsts: list[AttemptStart] = []
        try:
            async with self.store.claiming(self.worker_id, self.settings.claim_s, wait_s) as claim:
                free = self._free()  # read once the wait is over: `create` may have taken slots
                jobs = await claim.take(free)
                starts = await self._first_attempts(jobs)
                firsts = list(starts.values())
                claimed = await claim.start(starts)
        finally:
            self._give_back(firsts)
        return len(claimed) if free > 0 else -1

    async def _first_attempts(self, jobs: list[Job]) -> dict[str, AttemptStart]:
        """By job id, the first attempt of each queued job of a claim that can start at once,
        each launched on a reserved slot. The eligibility it decides on is read here, inside
        the claim, after its wait on the server (I5: a certification that expired or a circuit
        opened while it waited must not get a first attempt)."""
        queued = [
            job for job in jobs if job.state is JobState.QUEUED and job.id not in self._active
        ]
        if not queued:
            return {}
        eligibility = await self._claim_eligibility()
        starts: dict[str, AttemptStart] = {}
        for job in queued:
            task, known = self.tasks.get(job.task), eligibility.get(job.task)
            if task is None or known is None:
                continue
            deadline = Deadline.of(job)
            step = decide_step(task, [], known, deadline)
            first = self._first_start(task, step, deadline, job.owner)
            if first is not None and await self._launch(first, None) is not None:
                starts[job.id] = first
        return starts

    def _free(self) -> int:
        """Jobs this worker may still take: its slots less the jobs driven or queued here."""
        return self.settings.workers - len(self._active) - self._queue.qsize()

    async def _heartbeat(self) -> None:
        interval = min(self.settings.claim_s, self.settings.lease_s) / 3
        while True:
            stop_if_cancelled()
            await asyncio.sleep(interval)
            try:
                await self.store.renew(
                    self.worker_id,
                    [*self._active, *self._queued],
                    self.settings.lease_s,
                    self.settings.claim_s,
                )
            except Exception:
                log.exception("heartbeat failed")
