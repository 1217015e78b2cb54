"""`SqlStore`: the job store's domain operations, written once over a `Connector`.

Every state change runs in one write transaction together with its events (and, for a terminal
change, its outbox row), so the log, the row and the outbox can never disagree.
"""

from __future__ import annotations

import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any, Literal

from router.errors import AttemptNotFound, IdempotencyConflict, InvalidTransition, JobNotFound
from router.models import (
    Attempt,
    AttemptUsage,
    FinishOutcome,
    Job,
    JsonObject,
    NewEvent,
    new_id,
    payload_fingerprint,
)
from router.states import AttemptState, JobState, attempt_can_move, job_can_move
from router.store.bus import BusMethods
from router.store.certifications import CertificationMethods
from router.store.changes import Change, ChangeMethods
from router.store.circuits import CircuitMethods
from router.store.claims import AttemptStart as AttemptStart
from router.store.claims import ClaimMethods
from router.store.connector import ChangeFeed, Connector, LoadAware, Row, Tx
from router.store.health import HealthMethods
from router.store.listing import ListingMethods
from router.store.outbox import OutboxMethods
from router.store.reads import ReadMethods
from router.store.rows import attempt_from_row, dumps, job_from_row
from router.store.tokens import TokenMethods


class SqlStore(
    ReadMethods, ChangeMethods, ClaimMethods, TokenMethods, HealthMethods, OutboxMethods,
    CircuitMethods, CertificationMethods, ListingMethods, BusMethods,
):
    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self.url = connector.url
        self._q = connector.queries
        self._changed: dict[str, list[Change]] = {}  # see ChangeMethods
        self._created: OrderedDict[str, Job] = OrderedDict()
        if isinstance(connector, ChangeFeed):
            connector.on_change(self._heard)

    async def close(self) -> None:
        await self.connector.close()

    def track_load(self, jobs_in_flight: Callable[[], int]) -> None:
        """Tell the connector how many jobs this process has in flight, where it cares."""
        if isinstance(self.connector, LoadAware):
            self.connector.jobs_in_flight = jobs_in_flight

    async def follow(self, what: Literal["events", "settled", "runnable"]) -> bool:
        """Hear other processes' changes of this kind from now on (a backend with a
        ChangeFeed; without one they are found by polling): "settled" for `Router.wait`,
        "events" for `Router.watch`, "runnable" for workers."""
        if isinstance(self.connector, ChangeFeed) and await self.connector.follow(what):
            if what == "settled":  # jobs created here may have settled elsewhere unheard
                self._created.clear()
            return True
        return False

    @property
    def feed_live(self) -> bool:
        """Whether other processes' changes are heard as they commit (else: poll)."""
        return isinstance(self.connector, ChangeFeed) and self.connector.feed_live

    def on_runnable(self, callback: Callable[[], None]) -> None:
        """Call `callback()` when another process submits or frees a job (a backend with a
        ChangeFeed); without one, such jobs are found by polling."""
        if isinstance(self.connector, ChangeFeed):
            self.connector.on_runnable(callback)

    # ---- submit ------------------------------------------------------------------------------

    async def create_job(
        self, *, owner: str, idempotency_key: str, task: str, input: JsonObject,
        params: JsonObject, deadline_s: float | None, claimed_by: str | None, claim_s: float,
    ) -> Job:  # fmt: skip
        """Insert the job, or return the one with the same key (I1); never read-then-insert."""
        job, _ = await self.create_and_start(
            owner=owner, idempotency_key=idempotency_key, task=task, input=input, params=params,
            deadline_s=deadline_s, claimed_by=claimed_by, claim_s=claim_s)  # fmt: skip
        return job

    async def create_and_start(
        self, *, owner: str, idempotency_key: str, task: str, input: JsonObject,
        params: JsonObject, deadline_s: float | None, claimed_by: str | None, claim_s: float,
        first: AttemptStart | None = None,
        on_created: Callable[[Job, Attempt | None], None] | None = None,
    ) -> tuple[Job, Attempt | None]:  # fmt: skip
        """`create_job`, and when it creates the job and `first` is given, that first attempt
        in the same transaction (the job is then `running`). A job found under the key gets
        no attempt: (job, None). `on_created(job, attempt)` runs once the new job is committed,
        even if this call is cancelled while waiting for the commit (the job must reach a
        worker all the same)."""
        now = time.time()
        fingerprint = payload_fingerprint(task, input, params)
        row_params = {
            "id": new_id(), "owner": owner, "idempotency_key": idempotency_key,
            "fingerprint": fingerprint, "task": task, "input": dumps(input),
            "params": dumps(params), "now": now,
            "deadline_at": now + deadline_s if deadline_s else None,
            "claimed_by": claimed_by, "claim_until": now + claim_s if claimed_by else None,
        }  # fmt: skip
        queued = NewEvent(kind="job.queued", data={"task": task})
        job = attempt = None
        try:
            async with self.connector.write() as tx:
                if first is None:
                    row = await tx.fetchone(self._q["insert_job"], {
                        **row_params, "state": JobState.QUEUED, "version": 1, "event_seq": 1})
                    if row is not None:
                        await self._insert_events(tx, row["id"], [(queued, JobState.QUEUED)],
                                                  1, now)  # fmt: skip
                else:
                    row, attempt = await self._insert_started(tx, row_params, queued, first, now)
                if row is not None:
                    job = job_from_row(row, created=True)
                    self._remember_created(job)
                    if on_created is not None:
                        tx.after_commit(functools.partial(on_created, job, attempt))
        except BaseException:
            self._forget_created(str(row_params["id"]))
            raise
        if job is None:
            return await self._existing(owner, idempotency_key, fingerprint), None
        if attempt is not None:
            self._notify(job.id, job)
        return job, attempt

    async def _insert_started(
        self, tx: Tx, row_params: dict[str, Any], queued: NewEvent, first: AttemptStart,
        now: float,
    ) -> tuple[Row | None, Attempt | None]:  # fmt: skip
        """Insert the job already running, its first attempt and all their events: three
        statements, where a queued job and a separate move would take six."""
        events = [queued, *first.notes]
        row = await tx.fetchone(self._q["insert_job"], {
            **row_params, "state": JobState.RUNNING, "version": 2,
            "event_seq": len(events) + 1})  # fmt: skip
        if row is None:
            return None, None
        attempt_row = await tx.fetchone(self._q["insert_attempt"], {
            "id": new_id(), "job_id": row["id"], "provider": first.provider,
            "model": first.model, "now": now, "worker": first.worker,
            "lease_until": now + first.lease_s})  # fmt: skip
        assert attempt_row is not None
        attempt = attempt_from_row(attempt_row)
        events.append(NewEvent(kind="attempt.started", data={
            "attempt_id": attempt.id, "provider": first.provider, "seq": attempt.seq}))
        states = [JobState.QUEUED] + [JobState.RUNNING] * (len(events) - 1)
        await self._insert_events(tx, row["id"], list(zip(events, states, strict=True)), 1, now)
        return row, attempt

    async def _existing(self, owner: str, idempotency_key: str, fingerprint: str) -> Job:
        existing = await self.find_job(owner, idempotency_key)
        if existing is None:  # purged between the two statements: the caller may submit again
            raise JobNotFound(f"{owner}/{idempotency_key}")
        if existing.fingerprint != fingerprint:
            raise IdempotencyConflict(
                owner=owner, idempotency_key=idempotency_key, job_id=existing.id
            )
        return existing

    # ---- attempts ----------------------------------------------------------------------------

    async def start_attempt(
        self, job_id: str, *, provider: str, model: str | None, worker: str, lease_s: float,
        exclusive: bool, notes: Sequence[NewEvent] = (),
    ) -> tuple[Job, Attempt]:  # fmt: skip
        """Write the attempt row before the provider is called; the job becomes `running`."""
        now = time.time()
        start = AttemptStart(provider, model, worker, lease_s, tuple(notes))
        async with self.connector.write() as tx:
            job = await self._lock_job(tx, job_id)
            job, attempt = await self._start_in(tx, job, start, exclusive, now)
        self._notify(job_id, job)
        return job, attempt

    async def _start_in(
        self, tx: Tx, job: Job, start: AttemptStart, exclusive: bool, now: float
    ) -> tuple[Job, Attempt]:
        if job.state not in (JobState.QUEUED, JobState.RUNNING):
            raise InvalidTransition(
                entity="job", entity_id=job.id, src=job.state, dst="new attempt",
                why="only a queued or running job starts attempts",
            )  # fmt: skip
        if exclusive:
            await self._refuse_if_open(tx, job.id)
        row = await tx.fetchone(self._q["insert_attempt"], {
            "id": new_id(), "job_id": job.id, "provider": start.provider, "model": start.model,
            "now": now, "worker": start.worker, "lease_until": now + start.lease_s,
        })  # fmt: skip
        assert row is not None
        attempt = attempt_from_row(row)
        if job.state is JobState.QUEUED:
            job = await self._move_job(tx, job, JobState.RUNNING, now=now)
        started = NewEvent(kind="attempt.started", data={
            "attempt_id": attempt.id, "provider": start.provider, "seq": attempt.seq})
        await self._append(tx, job.id, job.state, [*start.notes, started], now)
        return job, attempt

    async def finish_attempt_cas(
        self, attempt_id: str, output: Any, usage: AttemptUsage,
        *, only_from: AttemptState | None = None,
    ) -> FinishOutcome:  # fmt: skip
        """The compare-and-swap of I2: the first finisher wins, later ones are recorded `lost`.
        `only_from`: refuse (InvalidTransition) unless the attempt is in that state, under the
        job's lock."""
        now = time.time()
        async with self.connector.write() as tx:
            job, attempt = await self._lock_attempt(tx, attempt_id)
            _require_state(attempt, only_from, AttemptState.SUCCEEDED)
            if attempt.state.terminal:  # recorded already: by this call's own earlier try
                # (its COMMIT acknowledgement lost: the win is reported again, never lost) or
                # by a cancel under it (nothing to record)
                return FinishOutcome(won=job.winner_attempt_id == attempt_id, job=job,
                                     attempt=attempt)
            won_row = None
            if job.winner_attempt_id is None and not job.state.terminal:
                won_row = await tx.fetchone(self._q["finish_job_cas"], {
                    "id": job.id, "version": job.version, "attempt_id": attempt_id,
                    "result": dumps(output), "now": now,
                })  # fmt: skip
            if won_row is None:
                lost = await self._finish(tx, attempt, AttemptState.LOST, usage, now,
                                          error=f"finished after {job.winner_attempt_id} won")
                await self._append(tx, job.id, job.state, [NewEvent(kind="attempt.lost", data={
                    "attempt_id": attempt_id, "provider": attempt.provider,
                    "winner_attempt_id": job.winner_attempt_id})], now)  # fmt: skip
                outcome = FinishOutcome(won=False, job=job, attempt=lost)
            else:
                won = await self._finish(tx, attempt, AttemptState.SUCCEEDED, usage, now,
                                         output=output)
                job = job_from_row(won_row)
                await self._append(tx, job.id, job.state, [
                    NewEvent(kind="attempt.succeeded", data={"attempt_id": attempt_id,
                             "provider": attempt.provider}),
                    NewEvent(kind="job.succeeded", data={"winner_attempt_id": attempt_id}),
                ], now)  # fmt: skip
                await self._outbox(tx, job, now)
                outcome = FinishOutcome(won=True, job=job, attempt=won)
        self._notify(attempt.job_id, job if outcome.won else None)
        return outcome

    async def finish_attempt(
        self,
        attempt_id: str,
        state: AttemptState,
        *,
        error_kind: str | None,
        error: str | None,
        usage: AttemptUsage,
        output: Any = None,
        only_from: AttemptState | None = None,
    ) -> Attempt:
        """An attempt ends without a result: failed, unknown or cancelled. `output` keeps an
        answer that did not win (an exclusive task's unusable answer, an answer whose result
        could not be recorded) on the attempt, for the operator who resolves it (`only_from`:
        as in finish_attempt_cas)."""
        if state is AttemptState.SUCCEEDED:
            raise ValueError("a success goes through finish_attempt_cas")
        now = time.time()
        async with self.connector.write() as tx:
            job, attempt = await self._lock_attempt(tx, attempt_id)
            _require_state(attempt, only_from, state)
            if attempt.state.terminal or attempt.state is state:  # already recorded (cancel,
                return attempt  # or a second sweeper): keep the first record
            done = await self._finish(tx, attempt, state, usage, now, error_kind, error, output)
            data = {"attempt_id": attempt_id, "provider": attempt.provider,
                    "error_kind": error_kind, "error": error}  # fmt: skip
            await self._append(tx, job.id, job.state, [NewEvent(kind=f"attempt.{state}",
                                                                data=data)], now)
        self._notify(attempt.job_id)
        return done

    # ---- job outcomes ------------------------------------------------------------------------

    async def settle_job(
        self, job_id: str, state: JobState, *, error: str | None, notes: Sequence[NewEvent] = ()
    ) -> Job:
        """Move a job to failed / unknown (or back to running), with its events and outbox row."""
        now = time.time()
        async with self.connector.write() as tx:
            job = await self._lock_job(tx, job_id)
            if job.state is state:
                return job
            job = await self._move_job(tx, job, state, now=now, error=error)
            data: JsonObject = {"error": error} if error else {}
            await self._append(tx, job_id, state, [*notes, NewEvent(kind=f"job.{state}",
                                                                    data=data)], now)
            if state.terminal:
                await self._outbox(tx, job, now)
        self._notify(job_id, job)
        return job

    async def note(self, job_id: str, events: Sequence[NewEvent]) -> None:
        """Append informational events (a provider skipped, the job waiting) without a change."""
        now = time.time()
        async with self.connector.write() as tx:
            job = await self._lock_job(tx, job_id)
            await self._append(tx, job_id, job.state, events, now)
        self._notify(job_id)

    async def cancel_job(self, job_id: str, reason: str) -> Job:
        now = time.time()
        async with self.connector.write() as tx:
            job = await self._lock_job(tx, job_id)
            if job.state is JobState.CANCELLED:
                return job
            events, unknown = [], []
            for row in await tx.fetchall(self._q["open_attempts_of_job"], {"job_id": job_id}):
                attempt = attempt_from_row(row)
                if attempt.state is AttemptState.UNKNOWN:  # it may have happened: cancelling
                    unknown.append(attempt.id)  # the job does not undo that, so the attempt
                    continue  # keeps saying so (an operator may still resolve it)
                await self._finish(tx, attempt, AttemptState.CANCELLED, AttemptUsage(), now,
                                   error_kind="cancelled", error=reason)
                events.append(NewEvent(kind="attempt.cancelled",
                                       data={"attempt_id": attempt.id, "error": reason}))
            job = await self._move_job(tx, job, JobState.CANCELLED, now=now, error=reason)
            events.append(NewEvent(kind="job.cancelled", data={
                "reason": reason, **({"unknown_attempts": unknown} if unknown else {})}))
            await self._append(tx, job_id, job.state, events, now)
            await self._outbox(tx, job, now)
        self._notify(job_id)
        return job

    async def resolve_attempt(
        self, attempt_id: str, outcome: AttemptState, result: Any, note: str
    ) -> tuple[Job, Attempt]:
        """An operator says what became of an `unknown` attempt (out of band). Only an unknown
        attempt: checked under the job's lock, so a sweeper or a late answer that changed it
        meanwhile wins and the resolution is refused (InvalidTransition)."""
        if outcome is AttemptState.SUCCEEDED:
            finished = await self.finish_attempt_cas(
                attempt_id, result, AttemptUsage(), only_from=AttemptState.UNKNOWN)
            return finished.job, finished.attempt
        attempt = await self.finish_attempt(
            attempt_id, outcome, error_kind="resolved", error=note, usage=AttemptUsage(),
            only_from=AttemptState.UNKNOWN,
        )  # fmt: skip
        job = await self.get_job(attempt.job_id)
        assert job is not None
        return job, attempt

    async def reopen_job(self, job_id: str, reason: str) -> Job:
        """unknown -> running, due now: the policy decides again after an operator resolved."""
        now = time.time()
        async with self.connector.write() as tx:
            job = await self._lock_job(tx, job_id)
            if job.state is not JobState.UNKNOWN:
                return job
            job = await self._move_job(tx, job, JobState.RUNNING, now=now)
            await tx.execute(self._q["clear_claim"], {"id": job_id, "next_run_at": now})
            await self._append(tx, job_id, job.state,
                               [NewEvent(kind="job.reopened", data={"reason": reason})], now)
        self._notify(job_id)
        return job

    # ---- building blocks (inside a transaction) ------------------------------------------------

    async def _lock_job(self, tx: Tx, job_id: str) -> Job:
        row = await tx.fetchone(self._q["lock_job"], {"id": job_id})
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row)

    async def _lock_attempt(self, tx: Tx, attempt_id: str) -> tuple[Job, Attempt]:
        """The attempt's job, locked, and the attempt as it is under that lock. Every change of
        an attempt's state holds its job's lock, so the attempt cannot change after this read;
        one read before the lock could be stale (a sweeper of another process, or the late
        answer of a worker thought dead, changed it meanwhile)."""
        row = await tx.fetchone(self._q["lock_job_of_attempt"], {"attempt_id": attempt_id})
        if row is None:
            raise AttemptNotFound(attempt_id)
        return job_from_row(row), await self._attempt(tx, attempt_id)

    async def _attempt(self, tx: Tx, attempt_id: str) -> Attempt:
        row = await tx.fetchone(self._q["get_attempt"], {"id": attempt_id})
        if row is None:
            raise AttemptNotFound(attempt_id)
        return attempt_from_row(row)

    async def _refuse_if_open(self, tx: Tx, job_id: str) -> None:
        open_rows = await tx.fetchall(self._q["open_attempts_of_job"], {"job_id": job_id})
        if open_rows:
            first = attempt_from_row(open_rows[0])
            raise InvalidTransition(
                entity="job", entity_id=job_id, src=f"attempt {first.id} {first.state}",
                dst="new attempt", why="an exclusive task waits until that attempt is resolved",
            )  # fmt: skip

    async def _move_job(
        self, tx: Tx, job: Job, dst: JobState, *, now: float, error: str | None = None
    ) -> Job:
        if not job_can_move(job.state, dst):
            raise InvalidTransition(entity="job", entity_id=job.id, src=job.state, dst=dst)
        row = await tx.fetchone(self._q["update_job_state"], {
            "id": job.id, "version": job.version, "state": dst, "error": error, "now": now,
            "next_run_at": now})  # fmt: skip
        if row is None:
            raise InvalidTransition(entity="job", entity_id=job.id, src=job.state, dst=dst,
                                    why=f"version {job.version} is no longer current")
        return job_from_row(row)

    async def _finish(
        self, tx: Tx, attempt: Attempt, dst: AttemptState, usage: AttemptUsage, now: float,
        error_kind: str | None = None, error: str | None = None, output: Any = None,
    ) -> Attempt:
        if not attempt_can_move(attempt.state, dst):
            raise InvalidTransition(entity="attempt", entity_id=attempt.id, src=attempt.state,
                                    dst=dst)
        row = await tx.fetchone(self._q["finish_attempt"], {
            "id": attempt.id, "from_state": attempt.state, "state": dst,
            "error_kind": error_kind, "error": error, "output": dumps(output), "now": now,
            "latency_ms": usage.latency_ms, "model": usage.model,
            "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "cost_usd": usage.cost_usd})  # fmt: skip
        if row is None:
            raise InvalidTransition(entity="attempt", entity_id=attempt.id, src=attempt.state,
                                    dst=dst, why="it changed under us")
        return attempt_from_row(row)

    async def _append(
        self, tx: Tx, job_id: str, job_state: JobState, events: Iterable[NewEvent], now: float
    ) -> None:
        batch = list(events)
        if not batch:
            return
        row = await tx.fetchone(self._q["bump_event_seq"], {"id": job_id, "n": len(batch)})
        assert row is not None
        first = int(row["event_seq"]) - len(batch) + 1
        await self._insert_events(tx, job_id, [(event, job_state) for event in batch], first, now)

    async def _insert_events(
        self, tx: Tx, job_id: str, batch: Sequence[tuple[NewEvent, JobState]], first: int,
        now: float,
    ) -> None:  # fmt: skip
        """All of `batch` (each event with the job's state it records) in one statement,
        numbered from `first`."""
        params: dict[str, Any] = {"job_id": job_id, "at": now}
        for i, (event, state) in enumerate(batch):
            params.update({f"seq{i}": first + i, f"kind{i}": event.kind, f"state{i}": state,
                           f"data{i}": dumps(event.data)})
        await tx.execute(_events_insert(len(batch)), params)

    async def _outbox(self, tx: Tx, job: Job, now: float) -> None:
        payload = {"event": f"job.{job.state}", "job_id": job.id, "owner": job.owner,
                   "idempotency_key": job.idempotency_key, "task": job.task,
                   "state": job.state, "result": job.result, "error": job.error,
                   "version": job.version}  # fmt: skip
        await tx.execute(self._q["insert_outbox"], {
            "id": new_id(), "job_id": job.id, "owner": job.owner, "kind": f"job.{job.state}",
            "payload": dumps(payload), "now": now})


def _require_state(attempt: Attempt, only_from: AttemptState | None, dst: AttemptState) -> None:
    if only_from is not None and attempt.state is not only_from:
        why = f"only an attempt in state {only_from} may"
        raise InvalidTransition(entity="attempt", entity_id=attempt.id, src=attempt.state,
                                dst=dst, why=why)  # fmt: skip


@lru_cache(maxsize=16)
def _events_insert(rows: int) -> str:
    """INSERT of `rows` events in one statement (the same text for the same count: translated
    and prepared once per backend)."""
    values = ", ".join(f"(:job_id, :seq{i}, :kind{i}, :state{i}, :data{i}, :at)"
                       for i in range(rows))
    return f"INSERT INTO job_events (job_id, seq, kind, job_state, data, at) VALUES {values}"
