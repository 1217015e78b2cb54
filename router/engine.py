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
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from jobrouter.aio import stop_if_cancelled, wait_event
from jobrouter.driver import JobDriver
from jobrouter.errors import BudgetUnheld
from jobrouter.health import ProviderHealth
from jobrouter.models import Attempt, Job
from jobrouter.pace import Pace
from jobrouter.policy import Eligibility
from jobrouter.providers import CompletionRequest, Provider
from jobrouter.slots import Reservation, Slots
from jobrouter.spending import Spending
from jobrouter.step import Step, decide_step, next_step
from jobrouter.store.claims import AttemptStart, Claimed, FirstAttempt
from jobrouter.store.jobstore import JobStore
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


OnCreated = Callable[[Job, Attempt | None], None]
# Writes the job (the store's `create_and_start`, the job's fields bound) with its first
# attempt if one is given, and runs the hook once the new job is committed.
Insert = Callable[[AttemptStart | None, OnCreated], Awaitable[Job]]


@dataclass(frozen=True)
class Launch:
    """How a job this process is about to create starts: its `first` attempt in the creating
    transaction, on the `slot` reserved for it (`request`: the provider request the door
    built); or, with neither, created queued and driven through the queue."""

    first: AttemptStart | None = None
    slot: Reservation | None = None
    request: CompletionRequest | None = None


QUEUED = Launch()


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

    async def create(
        self, task: TaskRuntime, request: CompletionRequest, insert: Insert, owner: str
    ) -> Job:
        """Create `owner`'s job of `task` claimed by this process, through `insert`: with its first
        attempt when it can start at once (`_launch`); once committed the job goes to a driver
        here (`_created`). A slot reserved for it and not handed over (the job already existed,
        or nothing was committed) is free again when this returns or raises."""
        launch = await self._launch(task, request, owner)
        try:
            return await insert(launch.first, functools.partial(self._created, launch))
        finally:
            if launch.slot is not None:
                launch.slot.give_back()

    async def _launch(self, task: TaskRuntime, request: CompletionRequest, owner: str) -> Launch:
        """How a job of `task` this process is about to create starts. When it can start
        at once (a worker slot is free, and the policy picks a provider whose circuit is
        closed) its first attempt goes in the creating transaction, with the slot reserved
        for it. Otherwise the job is created queued and goes the usual way: a half-open
        circuit's probe, for one, is claimed in a transaction of its own; a failed read of the
        eligibility never stops a job from being accepted."""
        if self._stopping or not self._loops or self._slots.full:
            return QUEUED  # not started yet (warming up) or stopping: the job goes queued
        deadline = Deadline.new(task, time.time())
        try:
            step = await next_step(self.health, task, [], deadline)
        except Exception:
            log.exception("eligibility for task %s unknown: the job is created queued", task.name)
            return QUEUED
        first = self._first_start(task, step, deadline, owner, request)
        if first is None or self._stopping:
            return QUEUED
        slot = await self._slots.reserve()  # None: all taken while the eligibility was read
        return Launch(first, slot, request) if slot is not None else QUEUED

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

    def _created(self, launch: Launch, job: Job, attempt: Attempt | None) -> None:
        """The store's after-commit hook for a job `create` made (run even if the creating
        call was cancelled while waiting for the commit): driven at once on its slot when it
        was committed with its first attempt, else queued for a driver."""
        if launch.first is not None and launch.slot is not None and attempt is not None:
            self._run_started(job, attempt, launch.first, launch.slot, launch.request)
        else:
            self.hand_over(job)

    def _run_started(
        self,
        job: Job,
        attempt: Attempt,
        first: AttemptStart,
        slot: Reservation,
        request: CompletionRequest | None = None,
    ) -> None:
        """Drive a job committed together with its first attempt, on the slot reserved for it;
        `request`: its provider request when the door built it (else the driver builds it)."""
        self._active[job.id] = asyncio.create_task(
            self._drive(job, attempt, first, request), name=f"job-{job.id}"
        )
        slot.handed_over()

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
        one transaction (see `JobStore.claim_runnable`; `wait_s`: waiting on the server first
        for a job). Each such attempt has its slot reserved as `launch` does: `stop` waits for
        them, and they are driven once committed."""
        if self._free() <= 0:
            return -1  # full: nothing claimed, but not for want of jobs
        free_after_wait = 1

        def free() -> int:  # read again once the wait is over: `create` may have taken slots
            nonlocal free_after_wait
            free_after_wait = self._free()
            return free_after_wait

        slots: dict[str, Reservation] = {}  # by job id: the slots of the attempts chosen
        first = self._first_chooser(slots)

        def take(claimed: list[Claimed]) -> None:
            for item in claimed:
                if item.attempt is not None and item.first is not None:
                    self._run_started(item.job, item.attempt, item.first, slots[item.job.id])
                elif item.job.id not in self._active:  # else its driver has it: renewed
                    self._enqueue(item)

        try:
            claimed = await self.store.claim_runnable(
                self.worker_id, self.settings.claim_s, free, first, take, wait_s
            )
        finally:
            for slot in slots.values():  # not committed: the attempts chosen were never
                slot.give_back()  # written (a slot handed over stays with its driver)
        return len(claimed) if free_after_wait > 0 else -1

    def _first_chooser(self, slots: dict[str, Reservation]) -> FirstAttempt:
        """The chooser of first attempts for one claim; the slot of each attempt it chooses
        goes in `slots`. The eligibility it decides on is read when it is first called: once
        the claim's wait on the server is over (I5: a certification that expired or a circuit
        opened while it waited must not get a first attempt)."""
        eligibility: dict[str, dict[str, Eligibility]] | None = None

        async def first(job: Job) -> AttemptStart | None:
            nonlocal eligibility
            if eligibility is None:
                eligibility = await self._claim_eligibility()
            task, known = self.tasks.get(job.task), eligibility.get(job.task)
            if task is None or known is None or job.id in self._active:
                return None
            deadline = Deadline.of(job)
            step = decide_step(task, [], known, deadline)
            start = self._first_start(task, step, deadline, job.owner)
            if start is None or self._stopping:
                return None
            slot = await self._slots.reserve()
            if slot is None:
                return None
            slots[job.id] = slot
            return start

        return first

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
