"""Drives one claimed job: asks the policy what next, writes each attempt before calling its
provider, runs hedged attempts side by side, and lets the store's compare-and-swap pick the one
winner. Every outcome is recorded; nothing is decided from an exception escaping.

The provider request is built before any attempt row is written: a job whose request cannot be
built ends without an attempt (nothing was sent). Each attempt's call and the record of its
outcome are an `AttemptCall` (router/attempt_call.py): the driver launches them, waits for
them, and stops those still in flight when it lets go of the job. Each call's `CallRecord`
(router/call_phase.py) is shared by the driver, the call and the worker's `InHand`; what the
driver stops, records `not called` or adopts, it decides by the call's phase.

A driver knows the store, the provider-health port (router/health.py), the providers and its
`Worker` (router/worker.py); each decision is one `jobrouter.step.next_step` (read eligibility,
ask the policy).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence

from jobrouter import tracing
from jobrouter.attempt_call import AttemptCall
from jobrouter.call_phase import CallRecord
from jobrouter.errors import BudgetCrossed, BudgetUnheld, InvalidTransition
from jobrouter.health import ProviderHealth
from jobrouter.models import Attempt, Job, NewEvent
from jobrouter.persist import persist
from jobrouter.policy import Decision, Eligibility, Finish, Start, Wait, unbuildable
from jobrouter.providers import CompletionRequest, Provider
from jobrouter.spending import Spending
from jobrouter.states import AttemptState, EventKind, JobState
from jobrouter.step import next_step
from jobrouter.store.connector import until_done
from jobrouter.store.jobstore import JobStore
from jobrouter.store.transient import is_transient
from jobrouter.tasks import TaskRuntime
from jobrouter.timing import Deadline
from jobrouter.worker import Worker

log = logging.getLogger("jobrouter.engine")


class JobDriver:
    def __init__(
        self,
        job: Job,
        task: TaskRuntime,
        *,
        store: JobStore,
        health: ProviderHealth,
        providers: Mapping[str, Provider],
        worker: Worker,
        spending: Spending,
        started: Attempt | None = None,
        noted: Sequence[NewEvent] = (),
        request: CompletionRequest | None = None,
    ) -> None:
        """`started`: the job's first attempt, already recorded (with `noted`, the refusals
        recorded with it) by the transaction that created the job; it is called at once with
        `request`, the request the door built for the job (given with `started`)."""
        self.store = store
        self.health = health
        self.providers = providers
        self.worker = worker
        self.spending = spending
        self.job = job
        self.task = task
        self.deadline = Deadline.of(job)  # set when the job was created: it never changes
        self.attempts: list[Attempt] = []
        # the calls this driver launched and has not seen end, by attempt id
        self.in_flight: dict[str, CallRecord] = {}
        self.request = request
        self._waiting_noted = False
        self._noted = {str(note.data["provider"]) for note in noted}  # refusals on the log
        self._started = started
        # providers a budget refused a start on, with why and until when (jobrouter.spending)
        self._held_back: dict[str, Eligibility] = {}

    async def run(self) -> None:
        with tracing.job_span(self.job) as span:
            try:
                await self._drive()
            finally:
                span.set_attribute("job.state", str(self.job.state))

    async def _drive(self) -> None:
        if self._started is not None:
            self.attempts = [self._started]
            self._launch(self._started)
        elif self.job.state is JobState.QUEUED:  # no attempts yet (the first one makes it
            self.attempts = []  # running): no read needed
        else:
            self.attempts = await persist(lambda: self.store.list_attempts(self.job.id))
        if self.request is None and not await self._build():
            return
        self._adopt_orphans()
        # Stopped from outside (router closing, job cancelled): whatever is still in flight has
        # an unknown outcome (I3). Only a settled job makes the rest hedge losers. Stopped by an
        # error (the store gone for longer than `persist` tries): the calls in flight end first
        # and record their own outcomes, so no answer is thrown away by cancelling it.
        reason: str | None = None
        try:
            while not self.job.state.settled:
                step = await persist(
                    lambda: next_step(
                        self.health, self.task, self.attempts, self.deadline, self._held_back
                    )
                )
                notes = [n for n in step.refusals() if n.data["provider"] not in self._noted]
                if not await self._carry_out(step.decision, notes):
                    return
            reason = "the job ended before this attempt answered"
        except Exception:
            if self.in_flight:
                log.exception(
                    "job %s: driving it failed; letting %d call(s) in flight end",
                    self.job.id,
                    len(self.in_flight),
                )
                await asyncio.gather(
                    *(call.task for call in self.in_flight.values()), return_exceptions=True
                )
            raise
        finally:
            await self._stop_in_flight(reason)

    async def _build(self) -> bool:
        """Build the job's provider request before any attempt row; False when it cannot be
        built (the job was ended or parked as `policy.unbuildable` says: nothing was sent)."""
        try:
            self.request = self.task.build_request(self.job.input, self.job.params)
        except Exception as exc:
            log.warning("job %s: the provider request cannot be built: %s", self.job.id, exc)
            await self._carry_out(unbuildable(self.attempts, f"{type(exc).__name__}: {exc}"), [])
            return False
        return True

    async def _carry_out(self, decision: Decision, notes: list[NewEvent]) -> bool:
        """Carry out one decision; False when the driver should let go of the job."""
        if not (isinstance(decision, Wait) and self.in_flight):
            self._noted.update(str(note.data["provider"]) for note in notes)
        if isinstance(decision, Start):
            await self._start(decision, notes)
        elif isinstance(decision, Finish):
            self.job = await persist(
                lambda: self.store.settle_job(
                    self.job.id,
                    decision.state,
                    error=decision.error,
                    notes=notes,
                    error_detail=decision.detail,
                )
            )
        elif self.in_flight:
            await self._wait_in_flight(decision.until)
        else:
            await self._park(decision, notes)
            return False
        return True

    async def _start(self, decision: Start, notes: list[NewEvent]) -> None:
        provider = self.providers[decision.provider]
        assert self.request is not None  # built before the first decision (`_drive`)
        try:
            reservation = self.spending.reservation(
                owner=self.job.owner,
                task=self.task.name,
                provider=decision.provider,
                request=self.request,
            )
        except BudgetUnheld as exc:
            self._hold_back(exc, decision.provider, notes)
            return
        if not await self.health.acquire(decision.provider):
            return  # another process took the circuit's single probe: decide again
        try:
            job, attempt = await self.store.start_attempt(
                self.job.id,
                provider=decision.provider,
                model=provider.model,
                worker=self.worker.id,
                lease_s=self._lease_s(decision.provider),
                exclusive=self.task.policy.exclusive,
                notes=[
                    *notes,
                    *(
                        [
                            NewEvent(
                                kind=EventKind.ATTEMPT_HEDGED, data={"provider": decision.provider}
                            )
                        ]
                        if decision.hedge
                        else []
                    ),
                ],
                reservation=reservation,
            )
        except BudgetCrossed as exc:
            self._hold_back(exc, decision.provider, notes)
            return
        except InvalidTransition:  # cancelled or resolved meanwhile: look again
            await self._refresh()
            return
        except Exception as exc:
            if not is_transient(exc):
                raise
            await self._adopt_after(exc, decision.provider)
            return
        self._see(job)
        self.attempts.append(attempt)
        self._launch(attempt)

    def _hold_back(
        self, refusal: BudgetCrossed | BudgetUnheld, provider: str, notes: list[NewEvent]
    ) -> None:
        """A budget refused the start on `provider`: hold back what it refuses (the next step
        fails over, waits or ends the job: `Spending.held_back`). The refusals that were to be
        recorded with the attempt go with the next step's instead."""
        log.info("job %s: %s", self.job.id, refusal)
        self._noted.difference_update(str(note.data["provider"]) for note in notes)
        self._held_back.update(
            self.spending.held_back(
                refusal, provider, self.task.policy.providers, on_budget=self.task.on_budget
            )
        )

    def _launch(self, attempt: Attempt) -> None:
        record = CallRecord(attempt)
        self.worker.in_hand.hold(record)
        record.task = asyncio.create_task(self._run(record))
        self.in_flight[attempt.id] = record

    async def _run(self, record: CallRecord) -> None:
        # The call is made when its task runs: the first attempt's task is launched before
        # `_build` (when the door did not build the request) and sees the request built.
        await self._call_for(record).run()

    def _call_for(self, record: CallRecord) -> AttemptCall:
        attempt = record.attempt
        return AttemptCall(
            attempt,
            store=self.store,
            health=self.health,
            provider=self.providers[attempt.provider],
            worker=self.worker,
            task=self.task,
            job=self.job,
            request=self.request,
            deadline=self.deadline,
            record=record,
            on_won=self._see,
        )

    async def _adopt_after(self, error: BaseException, provider: str) -> None:
        """`start_attempt` failed in a way that may have committed (a lost COMMIT
        acknowledgement): read the attempts again and adopt the one it may have written."""
        log.warning(
            "job %s: starting an attempt on %s failed (%s); reading it back",
            self.job.id,
            provider,
            error,
        )
        await self._refresh()
        self._adopt_orphans()

    def _adopt_orphans(self) -> None:
        """Call the `started` attempts this worker wrote and never called: held by nothing
        in its `InHand`, which keeps every call with a task here and every call whose request
        may be out (`CallPhase.request_out`). Left alone, each would wait for its lease to
        expire and end `unknown`, although its provider never received the request."""
        for attempt in self.attempts:
            if (
                attempt.state is AttemptState.STARTED
                and attempt.worker == self.worker.id
                and self.worker.in_hand.never_called(attempt.id)
            ):
                log.warning(
                    "job %s: attempt %s was written here and never called; calling it",
                    self.job.id,
                    attempt.id,
                )
                self._launch(attempt)

    def _see(self, job: Job) -> None:
        """Keep the newest view of the job: attempts finish concurrently with the loop."""
        if job.version >= self.job.version:
            self.job = job

    async def _wait_in_flight(self, until: float | None) -> None:
        timeout = None if until is None else max(0.0, until - time.time())
        done, _ = await asyncio.wait(
            [call.task for call in self.in_flight.values()],
            timeout=timeout,
            return_when=asyncio.FIRST_COMPLETED,
        )
        if not done:
            return
        for attempt_id, call in list(self.in_flight.items()):
            if call.task in done:
                del self.in_flight[attempt_id]
                call.task.result()  # a bug in an attempt's call must surface, not vanish
        if not self.job.state.settled:  # a winning attempt already brought the settled job
            await self._refresh()

    async def _park(self, decision: Wait, notes: list[NewEvent]) -> None:
        """Nothing can run now: note it once and give the job back until `until`."""
        if not self._waiting_noted:
            await persist(
                lambda: self.store.note(
                    self.job.id,
                    [
                        *notes,
                        NewEvent(
                            kind=EventKind.JOB_WAITING,
                            data={"reason": decision.reason, "until": decision.until},
                        ),
                    ],
                )
            )
            self._waiting_noted = True
        until = decision.until
        delay = self.worker.poll_s if until is None else until - time.time()
        await persist(lambda: self.store.release(self.job.id, self.worker.id, max(0.0, delay)))

    async def _refresh(self) -> None:
        job = await persist(lambda: self.store.get_job(self.job.id))
        if job is not None:
            self._see(job)
        self.attempts = await persist(lambda: self.store.list_attempts(self.job.id))

    async def _stop_in_flight(self, reason: str | None) -> None:
        """Let go of the calls in flight: cancel each one `stoppable` (not called yet, or
        calling: `reason` says why, None when the router stops and the outcome is unknown),
        never one `recording` (its answer is being written: I7); then record `not called`
        each one left `unsent` (its task never ran, or an unbuilt call's record failed)."""
        for call in self.in_flight.values():
            if not call.phase.stoppable:
                continue  # recording its outcome (won / lost / failed), or recorded
            if reason is not None:
                call.cancel_reason = reason
            call.task.cancel()
        # Not `gather`: a cancel of this driver while it waits (the router closing as a settled
        # job waits for a loser's record) would go on to the answered calls and cancel their
        # records. Each call ends by itself (a record is bounded by `persist`); the cancel is
        # passed on once every outcome is written.
        cancelled = False
        for call in self.in_flight.values():
            cancelled |= await until_done(call.task)
            if not call.task.cancelled():
                call.task.exception()  # retrieved: each call recorded its own outcome
        for call in list(self.in_flight.values()):
            self.worker.in_hand.let_go(call)  # (a task that never ran did not let go itself)
            if call.phase.unsent:
                await self._call_for(call).not_called()
        self.in_flight.clear()
        if cancelled:
            raise asyncio.CancelledError

    def _lease_s(self, provider: str) -> float:
        return self.worker.limits.lease_s(self.task, provider, self.deadline)
