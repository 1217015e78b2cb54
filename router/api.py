"""`Router`: the public Python API. Open it on a database, submit jobs, watch them finish.

It runs in the operator's own process and is trusted: the jobs and attempts it returns are
whole, `error` (the router's summary) and `error_detail` (the provider's words, scrubbed) alike.
Shown to anyone else (the job's owner), a value goes through `jobrouter.disclosure.disclose` first,
as the HTTP API and the console do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Generator, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from jobrouter import heap, telemetry
from jobrouter.build import (
    ProvidersOnUse,
    TasksOnUse,
    build_gate,
    build_spending,
    build_tasks,
    resolve_config,
    warm_up,
)
from jobrouter.config import RouterConfig
from jobrouter.door import DoorLimits, NewJob, admit
from jobrouter.errors import (
    AttemptNotFound,
    UnknownTask,
)
from jobrouter.gate import Gate
from jobrouter.identity import check_identity
from jobrouter.models import Job, JsonObject
from jobrouter.operations import Operations
from jobrouter.persist import persist
from jobrouter.providers import Provider
from jobrouter.reads import JobReads
from jobrouter.resolution import Outcome, resolution
from jobrouter.spending import Spending
from jobrouter.states import JobState
from jobrouter.store import SqlStore, open_store
from jobrouter.store.transient import is_transient
from jobrouter.tasks import TaskRuntime

if TYPE_CHECKING:  # built by jobrouter.fleet, imported only by a router that runs workers
    from jobrouter.engine import Engine
    from jobrouter.fleet import Delivery
    from jobrouter.leader import Leader

log = logging.getLogger("jobrouter.router")
_check_identity = check_identity  # the name `submit` calls it by


class Router(JobReads, Operations):
    """The door: open, submit, cancel, resolve, close. Its reads (a job, listings, watch,
    wait, spend) are jobrouter.reads' `JobReads`, its operator side (tokens, health, outbox,
    certifications) jobrouter.operations' `Operations`: one surface, three files."""

    def __init__(
        self,
        store: SqlStore,
        config: RouterConfig,
        tasks: Mapping[str, TaskRuntime],
        engine: Engine | None,
        providers: ProvidersOnUse,
        gate: Gate,
        deliverer: Delivery | None = None,
        leader: Leader | None = None,
        spending: Spending | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.tasks: Mapping[str, TaskRuntime] = (
            tasks if isinstance(tasks, TasksOnUse) else dict(tasks)
        )
        self.engine = engine
        self.providers = providers  # built when first read (`warm_up` reads them all)
        self.gate = gate
        self.deliverer = deliverer  # sends completion events to [webhooks.<owner>], if any
        self.leader = leader  # elects this process (or not) to run the periodic work
        self.spending = spending or build_spending(config)  # [budgets], at the door
        self.limits = DoorLimits(
            max_depth=config.submit.max_input_depth, max_bytes=config.submit.max_input_bytes
        )
        self._closed = False
        self._starting: asyncio.Task[None] | None = None  # see `open(start_in_background=...)`
        self._telemetry = False  # this router holds the process's OTLP export ([telemetry])

    @classmethod
    def open(
        cls,
        database_url: str | None = None,
        config: RouterConfig | str | Path | None = None,
        *,
        providers: Mapping[str, Provider] | None = None,
        run_workers: bool = True,
        start_in_background: bool = False,
        tasks_on_use: bool = False,
    ) -> _Opening:
        """Open a router: `router = await Router.open(...)` or `async with Router.open(...) as r`.

        `config` is a `RouterConfig` or the path of a jobrouter.toml; `database_url` overrides its
        [database] url. `providers` replaces the configured ones by name (tests, custom providers:
        each implements all of `jobrouter.providers.Provider`, `warm_up`, `model` and `close`
        included; the router closes them). With `run_workers` (default) jobs run on workers inside
        this process; without, nothing is started here (no engine, leader, outbox delivery or
        periodic task) and no provider is warmed up, so litellm is not imported: jobs submitted
        wait queued for a worker elsewhere (the CLI's quick commands). With
        `start_in_background` the router is returned before its providers are warmed up
        (litellm's import: seconds): a server answers at once; jobs submitted meanwhile are
        accepted queued, and no attempt starts until the workers start, after the warm-up.
        With `tasks_on_use` a task's contract is loaded when the task is first used (a submit,
        a resolve), not at open: a command that touches one task loads one contract, and a
        broken contract of another task is not reported here (`jobrouter config check` does).
        """
        return _Opening(
            cls._open(
                database_url, config, providers, run_workers, start_in_background, tasks_on_use
            )
        )

    @classmethod
    async def _open(
        cls,
        database_url: str | None,
        config: RouterConfig | str | Path | None,
        providers: Mapping[str, Provider] | None,
        run_workers: bool,
        start_in_background: bool = False,
        tasks_on_use: bool = False,
    ) -> Router:
        settings = resolve_config(config)
        tasks = TasksOnUse(settings) if tasks_on_use else build_tasks(settings)
        url = database_url or settings.database.url
        store = await open_store(
            url,
            command_timeout=settings.database.command_timeout,
            acquire_timeout=settings.database.acquire_timeout,
        )
        engine: Engine | None = None
        deliverer: Delivery | None = None
        leader: Leader | None = None
        try:
            provider_map = ProvidersOnUse(settings, providers)
            gate, breakers = build_gate(store, settings, provider_map)
            spending = build_spending(settings)
            if run_workers:
                from jobrouter import fleet  # the engine and what runs beside it: only to run

                engine = fleet.build_engine(
                    store, settings, tasks, provider_map, gate, breakers, spending
                )
                deliverer = fleet.build_delivery(store, settings)
                leader = fleet.build_leader(store, settings, engine, gate)
                if not start_in_background:  # before the first claim
                    await warm_up(provider_map.values())
            exporting = telemetry.acquire(settings.telemetry)
        except BaseException:
            await store.close()
            raise
        router = cls(
            store, settings, tasks, engine, provider_map, gate, deliverer, leader, spending
        )
        router._telemetry = exporting
        if run_workers and start_in_background:
            router._starting = asyncio.create_task(
                router._warm_up_then_start(), name="jobrouter-warm-up"
            )
        elif run_workers:
            router._start_workers()
        return router

    async def _warm_up_then_start(self) -> None:
        began = time.perf_counter()
        try:
            await warm_up(self.providers.values())
        except Exception:  # a provider that cannot load fails its attempts with its own error
            log.exception("warming up the providers failed; starting the workers all the same")
        self._start_workers()
        log.info("providers warmed up in %.2fs; workers started", time.perf_counter() - began)

    def _start_workers(self) -> None:
        if self.engine is not None and self.config.engine.freeze_startup_heap:
            heap.freeze_once()
        if self.engine is not None:
            self.engine.start()
        if self.leader is not None:
            self.leader.start()
        if self.deliverer is not None:
            self.deliverer.start()

    @property
    def warming_up(self) -> bool:
        """True from `open(start_in_background=True)` until the workers start: jobs are
        accepted (queued), but no attempt can start yet."""
        return self._starting is not None and not self._starting.done()

    async def started(self) -> None:
        """Wait until the workers run (at once unless opened with `start_in_background`)."""
        if self._starting is not None:
            await asyncio.shield(self._starting)

    async def close(self, grace_s: float = 0.0) -> None:
        """Close; with `grace_s`, jobs in hand get that long to finish before being stopped."""
        if self._closed:
            return
        self._closed = True
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        if self.engine is not None:
            await self.engine.stop(grace_s)
        if self.deliverer is not None:
            await self.deliverer.stop()
        if self.leader is not None:
            await self.leader.stop()
        for provider in self.providers.built():
            await provider.close()
        await self.store.close()
        if self._telemetry:  # the last flush is blocking HTTP: not on the event loop
            await asyncio.get_running_loop().run_in_executor(None, telemetry.release)

    # ---- jobs ----------------------------------------------------------------------------------

    async def submit(
        self,
        owner: str,
        idempotency_key: str,
        task: str,
        input: JsonObject,
        params: JsonObject | None = None,
    ) -> Job:
        """Accept a job once per (owner, key). The same payload again returns the same job
        (`created=False`); a different payload under the key raises `IdempotencyConflict`.

        The door (`jobrouter.door.admit`) refuses bad work first, with nothing written:
        `JobRefused` names the field, the value and what to do; `BudgetExhausted` (a
        `JobRefused`) when a budget covering a new job has nothing left this period."""
        runtime = self.check_submit(owner, idempotency_key, task)
        request = admit(runtime, input, params, self.limits)
        refusal = await self.spending.door(self.store.spend, owner, runtime.name)
        if refusal is not None and await self.find(owner, idempotency_key) is None:
            raise refusal  # a replay under its key still gets its job back
        return await self._create(
            NewJob(owner, idempotency_key, runtime, input, params or {}, request)
        )

    def task(self, name: str) -> TaskRuntime:
        """The configured task `name`; `UnknownTask` (naming the configured ones) if none."""
        runtime = self.tasks.get(name)
        if runtime is None:
            raise UnknownTask(name, sorted(self.tasks))
        return runtime

    def check_submit(self, owner: str, idempotency_key: str, task: str) -> TaskRuntime:
        """The checks `submit` makes before the door (it calls this), in its order, without
        submitting: an edge calls it to refuse a bad key or task before it reads more of the
        request (`RouterClosed`, `InvalidIdentity`, `InvalidIdempotencyKey`, `UnknownTask`).
        Returns the task."""
        self._check_open()
        _check_identity(owner, idempotency_key)
        return self.task(task)

    async def _create(self, new: NewJob) -> Job:
        """Create the job; with workers here, through the engine: claimed by them and, when it
        can start at once, with its first attempt in the same transaction (one commit instead
        of two), driven as soon as it is committed. A job found under its key, not settled, is
        taken up by the engine (`Engine.take_up`)."""
        engine = self.engine
        try:
            job = await (engine.create(new) if engine else self._insert(new))
        except Exception as exc:
            if not is_transient(exc):
                raise
            job = await self._read_back(new, exc)
        if engine is not None and not job.created and not job.state.settled:
            await engine.take_up(job)
        return job

    async def _insert(self, new: NewJob) -> Job:
        """The job created queued (or found under its key): claimed by this process's engine
        when it runs one, which the store hands it to once committed."""
        engine = self.engine
        claimed_by = engine.worker_id if engine else None
        return await new.create_in(
            self.store.jobs, claimed_by=claimed_by, claim_s=self.config.engine.claim
        )

    async def _read_back(self, new: NewJob, error: BaseException) -> Job:
        """Creating the job failed in a way that may have committed (a lost COMMIT
        acknowledgement): read it back by its key, creating it (queued) if it is not there.
        A job found is taken up like any replay (`created` is then False, even if it was this
        call's own lost COMMIT that created it)."""
        log.warning(
            "creating job %s/%s failed (%s); reading it back", new.owner, new.idempotency_key, error
        )
        return await persist(lambda: self._insert(new))

    async def cancel(self, job_id: str, reason: str = "cancelled by the owner") -> Job:
        self._check_open()
        job = await self.store.jobs.cancel_job(job_id, reason)
        if self.engine is not None:
            self.engine.interrupt(job_id)
        return job

    async def resolve(
        self,
        attempt_id: str,
        outcome: Outcome,
        result: Any = None,
        note: str = "",
        *,
        by: str = "",
    ) -> Job:
        """Say out of band what became of an `unknown` attempt. `succeeded` needs the `result`
        (it then competes in the compare-and-swap like any finish); `failed` / `cancelled` free
        the job to continue under its policy. `by` says who resolved (`token:ID`, `user:NAME`;
        default: this process's OS user); it and the note are kept on the attempt and in the
        job's events. Refused with ResolutionInvalid (nothing written) when the outcome or the
        result is not what router/resolution.py accepts."""
        self._check_open()
        attempt = await self.store.jobs.get_attempt(attempt_id)
        if attempt is None:
            raise AttemptNotFound(attempt_id)
        # Only an unknown attempt may be resolved: the store checks that under the job's lock
        # (this read could be stale), so the rule holds on every path that resolves.
        job = await self.get(attempt.job_id)
        runtime = self.tasks.get(job.task)
        checked = resolution(
            attempt_id, outcome, result, note, by, runtime.output_problems if runtime else None
        )
        job, _ = await self.store.jobs.resolve_attempt(
            attempt_id, checked.outcome, checked.result, checked.note, checked.by
        )
        if job.state is JobState.RUNNING and self.engine is not None:
            self.engine.wake()  # reopened: the policy decides again
        return job

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class _Opening:
    """What `Router.open` returns: await it, or use it as an async context manager."""

    def __init__(self, opening: Any) -> None:
        self._opening = opening
        self._router: Router | None = None

    def __await__(self) -> Generator[Any, None, Router]:
        return self._opening.__await__()  # type: ignore[no-any-return]

    async def __aenter__(self) -> Router:
        self._router = await self._opening
        return self._router

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._router is not None:
            await self._router.close()


__all__ = ["Router"]
