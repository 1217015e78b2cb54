"""Drives one claimed job: asks the policy what next, writes each attempt before calling its
provider, runs hedged attempts side by side, and lets the store's compare-and-swap pick the one
winner. Every outcome is recorded; nothing is decided from an exception escaping.

The provider request is built before any attempt row is written: a job whose request cannot be
built ends without an attempt (nothing was sent). Outcomes are written through `persist` (store
errors retried); an answer whose result still cannot be recorded is kept on its attempt, marked
"answered; result could not be recorded", for an operator to resolve with it.

A driver knows the store, the provider-health port (router/health.py), the providers and its
`Worker`; each decision is one `router.step.next_step` (read eligibility, ask the policy).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from providers import (
    Completion,
    CompletionRequest,
    ErrorKind,
    OutcomeUnknown,
    Provider,
    ProviderError,
)
from providers.errors import CassetteMiss
from providers.redact import scrub
from router import tracing
from router.disclosure import broken_contract, provider_failure
from router.errors import InvalidTransition
from router.health import ProviderHealth
from router.models import Attempt, AttemptUsage, Job, NewEvent, canonical_json
from router.persist import persist
from router.policy import (
    Decision,
    Finish,
    Start,
    Wait,
    ended_state,
    unbuildable,
)
from router.states import AttemptState, EventKind, JobState
from router.step import next_step
from router.store.sqlstore import SqlStore
from router.store.transient import is_transient
from router.tasks import TaskRuntime
from router.timing import AttemptLimits, Deadline

log = logging.getLogger("jobrouter.engine")

# Our own guard around a provider call, beyond the deadline the provider is asked to keep.
GUARD_S = 0.5
UNRECORDED = "unrecorded"  # error_kind of an answer whose result could not be recorded
NOT_CALLED = "the router stopped before calling the provider; nothing was sent"
MetricFn = Callable[[Attempt, bool], None]  # an ended attempt, and whether it timed out


@dataclass
class InHand:
    """Attempts of this worker with a task here (`tasks`), and those whose provider call began
    and whose outcome is not recorded yet (`calls_begun`): a `started` attempt of this worker
    in neither was never called (its driver failed first, or its COMMIT acknowledgement was
    lost), so calling it now is safe (the driver adopts it) where waiting would end it
    `unknown`. Shared by every driver of the process."""

    tasks: set[str] = field(default_factory=set)
    calls_begun: set[str] = field(default_factory=set)

    def never_called(self, attempt_id: str) -> bool:
        return attempt_id not in self.tasks and attempt_id not in self.calls_begun


@dataclass(frozen=True)
class Worker:
    """This process's worker as a job's driver sees it: its id (on the attempts it writes and
    the claims it releases), its attempt limits, how long a parked job waits when no recovery
    time is known, the attempts it has in hand, and where each ended attempt is counted."""

    id: str
    limits: AttemptLimits
    poll_s: float
    in_hand: InHand
    metric: MetricFn


class JobDriver:
    def __init__(
        self,
        job: Job,
        task: TaskRuntime,
        *,
        store: SqlStore,
        health: ProviderHealth,
        providers: Mapping[str, Provider],
        worker: Worker,
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
        self.job = job
        self.task = task
        self.deadline = Deadline.of(job)  # set when the job was created: it never changes
        self.attempts: list[Attempt] = []
        self.in_flight: dict[str, asyncio.Task[None]] = {}
        self.cancel_reasons: dict[str, str] = {}
        self.ended: dict[str, Attempt] = {}  # each attempt's row as its end was recorded
        self.answered: set[str] = set()  # provider call over: the outcome is being recorded
        self.calling: set[str] = set()  # the provider call began: the request may be out
        self.request = request
        self._waiting_noted = False
        self._noted = {str(note.data["provider"]) for note in noted}  # refusals on the log
        self._started = started

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
                    lambda: next_step(self.health, self.task, self.attempts, self.deadline)
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
                await asyncio.gather(*self.in_flight.values(), return_exceptions=True)
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
            )
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

    def _launch(self, attempt: Attempt) -> None:
        self.worker.in_hand.tasks.add(attempt.id)
        self.in_flight[attempt.id] = asyncio.create_task(self._run_attempt(attempt))

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
        """Call the `started` attempts this worker wrote and never called (see
        `InHand`). Left alone, each would wait for its lease to expire and end
        `unknown`, although its provider never received the request."""
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
            self.in_flight.values(), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            return
        for attempt_id, task in list(self.in_flight.items()):
            if task in done:
                del self.in_flight[attempt_id]
                task.result()  # a bug in _run_attempt must surface, not vanish
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
        for attempt_id, task in self.in_flight.items():
            if attempt_id in self.answered:
                continue  # its provider already answered: let it record won / lost / failed
            if reason is not None:
                self.cancel_reasons[attempt_id] = reason
            task.cancel()
        if self.in_flight:
            await asyncio.gather(*self.in_flight.values(), return_exceptions=True)
        for attempt_id in list(self.in_flight):
            self.worker.in_hand.tasks.discard(attempt_id)  # (a task that never ran kept it)
            if attempt_id not in self.ended and attempt_id not in self.calling:
                # Cancelled before its task ever ran: the provider was never called.
                attempt = next(a for a in self.attempts if a.id == attempt_id)
                await self._end(
                    attempt,
                    AttemptState.CANCELLED,
                    ErrorKind.NOT_SENT,
                    time.perf_counter(),
                    NOT_CALLED,
                )
        self.in_flight.clear()

    def _timeout_s(self, provider: str) -> float | None:
        return self.worker.limits.timeout_s(self.task, provider, self.deadline)

    def _lease_s(self, provider: str) -> float:
        return self.worker.limits.lease_s(self.task, provider, self.deadline)

    # ---- one attempt ---------------------------------------------------------------------------

    async def _run_attempt(self, attempt: Attempt) -> None:
        with tracing.attempt_span(attempt) as span:
            try:
                await self._call(attempt)
            finally:
                self.worker.in_hand.tasks.discard(attempt.id)
                if attempt.id in self.ended:  # recorded: nothing left to remember
                    self.worker.in_hand.calls_begun.discard(attempt.id)
                tracing.finish_attempt(span, self.ended.get(attempt.id, attempt))

    async def _call(self, attempt: Attempt) -> None:
        provider = self.providers[attempt.provider]
        began = time.perf_counter()
        try:
            timeout = self._timeout_s(attempt.provider)
            assert self.request is not None, "the request is built before any attempt row"
            request = self.task.for_attempt(self.request, self.job, timeout)
        except Exception as exc:  # nothing was sent: a definite not_sent failure
            self.answered.add(attempt.id)
            await self._end(
                attempt,
                AttemptState.FAILED,
                ErrorKind.NOT_SENT,
                began,
                "the request could not be built, nothing was sent",
                detail=f"the request could not be built, nothing was sent: {exc}",
            )
            return
        self.calling.add(attempt.id)
        self.worker.in_hand.calls_begun.add(attempt.id)
        try:
            async with asyncio.timeout(None if timeout is None else timeout + GUARD_S):
                completion = await provider.complete(request)
        except TimeoutError:
            self.answered.add(attempt.id)
            message = f"no answer within {timeout:.1f}s: the request may have run"
            await self.health.record(
                attempt.provider, OutcomeUnknown(message, provider=attempt.provider)
            )
            await self._end(
                attempt, AttemptState.UNKNOWN, ErrorKind.UNKNOWN, began, message, timed_out=True
            )
        except ProviderError as exc:
            self.answered.add(attempt.id)
            await self.health.record(attempt.provider, exc)
            await self._failed(
                attempt, exc.kind, began, provider_failure(exc), output=exc.answer, detail=str(exc)
            )
        except asyncio.CancelledError:
            await self._end_cancelled(attempt, began)
            raise
        except CassetteMiss:
            self.answered.add(attempt.id)
            log.error("cassette miss in attempt %s: recording is incomplete", attempt.id)
            await self._end(
                attempt, AttemptState.UNKNOWN, "cassette_miss", began, "request not in the cassette"
            )
            raise
        except Exception as exc:  # a provider bug: we cannot know whether it ran (I3)
            self.answered.add(attempt.id)
            log.exception("provider %s raised unexpectedly", attempt.provider)
            await self._end(
                attempt,
                AttemptState.UNKNOWN,
                ErrorKind.UNKNOWN,
                began,
                f"provider {attempt.provider} failed unexpectedly: the outcome is unknown",
                detail=scrub(f"provider raised {type(exc).__name__}: {exc}"),
            )
        else:
            self.answered.add(attempt.id)
            await self.health.record(attempt.provider, None)
            await self._succeed(attempt, completion, began)

    async def _failed(
        self,
        attempt: Attempt,
        kind: ErrorKind,
        began: float,
        error: str,
        output: Any = None,
        detail: str | None = None,
    ) -> None:
        """A failed call, recorded as what it proves (`policy.ended_state`): `error` is its
        summary, `detail` what the provider said (router/disclosure.py)."""
        state = ended_state(kind, exclusive=self.task.policy.exclusive)
        if kind is ErrorKind.REJECTED and state is AttemptState.UNKNOWN:
            error += (
                "; the provider may have acted and the task is exclusive: check it, then "
                "resolve this attempt (succeeded with the result, or failed)"
            )
        await self._end(attempt, state, kind, began, error, output=output, detail=detail)

    async def _succeed(self, attempt: Attempt, completion: Completion, began: float) -> None:
        problems = self.task.output_problems(completion.output)
        if problems:
            await self._failed(
                attempt,
                ErrorKind.REJECTED,
                began,
                broken_contract(attempt.provider),
                output=completion.output,
                detail="output breaks the contract: " + "; ".join(problems[:3]),
            )
            return
        usage = completion.usage
        cost = AttemptUsage(
            latency_ms=(time.perf_counter() - began) * 1000,
            model=completion.model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=usage.cost_usd,
        )
        try:
            outcome = await persist(
                lambda: self.store.finish_attempt_cas(attempt.id, completion.output, cost)
            )
        except Exception as exc:
            if not is_transient(exc):
                raise
            await self._unrecorded(attempt, completion.output, cost, exc)
            return
        if outcome.won:
            self._see(outcome.job)
        else:
            log.info(
                "attempt %s of job %s lost the race to %s",
                attempt.id,
                self.job.id,
                outcome.job.winner_attempt_id,
            )
        self.ended[attempt.id] = outcome.attempt
        self.worker.metric(outcome.attempt, False)

    async def _unrecorded(
        self, attempt: Attempt, output: Any, usage: AttemptUsage, error: BaseException
    ) -> None:
        """The answer's result could not be recorded: keep the answer on its attempt, marked
        unknown ("answered; result could not be recorded") for an operator to resolve with it;
        if even that cannot be written, the answer goes to the log, whole, at CRITICAL."""
        summary = (
            "answered; the result could not be recorded: resolve this attempt as "
            "succeeded with its output"
        )
        message = (
            f"answered; the result could not be recorded ({error}): resolve this "
            "attempt as succeeded with its output"
        )
        try:
            done = await persist(
                lambda: self.store.finish_attempt(
                    attempt.id,
                    AttemptState.UNKNOWN,
                    error_kind=UNRECORDED,
                    error=summary,
                    usage=usage,
                    output=output,
                    error_detail=message,
                )
            )
        except Exception:
            log.critical(
                "attempt %s of job %s answered but nothing could be recorded; its output: %s",
                attempt.id,
                self.job.id,
                canonical_json(output),
            )
            raise
        log.error("attempt %s of job %s: %s", attempt.id, self.job.id, message)
        self.ended[attempt.id] = done
        self.worker.metric(done, False)

    async def _end_cancelled(self, attempt: Attempt, began: float) -> None:
        reason = self.cancel_reasons.get(attempt.id)
        if reason is None:  # the router is shutting down: we do not know what the provider did
            await self._end(
                attempt,
                AttemptState.UNKNOWN,
                ErrorKind.UNKNOWN,
                began,
                "the router stopped while the request was in flight; the provider may have acted",
            )
        else:
            await self._end(attempt, AttemptState.CANCELLED, "cancelled", began, reason)

    async def _end(
        self,
        attempt: Attempt,
        state: AttemptState,
        kind: str,
        began: float,
        error: str,
        timed_out: bool = False,
        output: Any = None,
        detail: str | None = None,
    ) -> None:
        """Record an attempt's end: `error` is the summary anyone may read, `detail` the raw
        text behind it (operators only, router/disclosure.py)."""
        usage = AttemptUsage(latency_ms=(time.perf_counter() - began) * 1000)
        done = await persist(
            lambda: self.store.finish_attempt(
                attempt.id,
                state,
                error_kind=kind,
                error=error,
                usage=usage,
                output=output,
                error_detail=detail,
            )
        )
        self.ended[attempt.id] = done
        self.worker.metric(done, timed_out)
