"""One attempt's provider call, and the record of its outcome: the request is built for the
attempt, the provider called under our own guard, and whatever happens (an answer, a provider
error, a timeout, a cancellation, a provider bug) is written to the attempt's row. A won
compare-and-swap hands the settled job back to the driver (router/driver.py) that launched it.

An answer whose result cannot be recorded is kept on its attempt, marked "answered; result
could not be recorded", for an operator to resolve with it.

An `AttemptCall` knows the store, the provider-health port (router/health.py), its provider,
its `Worker` (router/worker.py), the task, the job's request and deadline, and its
`CallRecord` (router/call_phase.py), shared with its driver: the call moves it through its
phases as it goes (written, calling, answered or unbuilt, recorded), and the driver's stop reads
them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from jobrouter import tracing
from jobrouter.call_phase import CallPhase, CallRecord
from jobrouter.disclosure import broken_contract, provider_failure
from jobrouter.health import ProviderHealth
from jobrouter.models import Attempt, AttemptUsage, Job, canonical_json
from jobrouter.persist import persist
from jobrouter.policy import ended_state
from jobrouter.providers import (
    Completion,
    CompletionRequest,
    ErrorKind,
    OutcomeUnknown,
    Provider,
    ProviderError,
)
from jobrouter.providers.errors import CassetteMiss, InvalidOutput
from jobrouter.providers.redact import scrub, scrub_output
from jobrouter.states import AttemptState, EndReason
from jobrouter.store.jobstore import JobStore
from jobrouter.store.live_watch import LiveVerdict
from jobrouter.store.transient import is_transient
from jobrouter.tasks import TaskRuntime
from jobrouter.timing import Deadline
from jobrouter.worker import Worker

log = logging.getLogger("jobrouter.engine")

# Our own guard around a provider call, beyond the deadline the provider is asked to keep.
GUARD_S = 0.5
NOT_CALLED = "the router stopped before calling the provider; nothing was sent"
# the cost of an attempt that ended without a usable answer: nothing reported what it used
NO_ANSWER_USAGE = "no usage reported: the attempt ended without a usable answer"


class AttemptCall:
    """Runs one attempt's provider call and records its outcome."""

    def __init__(
        self,
        attempt: Attempt,
        *,
        store: JobStore,
        health: ProviderHealth,
        provider: Provider,
        worker: Worker,
        task: TaskRuntime,
        job: Job,
        request: CompletionRequest | None,
        deadline: Deadline,
        record: CallRecord,
        on_won: Callable[[Job], None],
    ) -> None:
        """`request`: the job's request (built before any attempt row); `record`: the call's
        record, in phase `written`; `on_won` is given the settled job when this attempt's answer
        wins the compare-and-swap."""
        self.attempt = attempt
        self.store = store
        self.health = health
        self.provider = provider
        self.worker = worker
        self.task = task
        self.job = job
        self.request = request
        self.deadline = deadline
        self.record = record
        self.on_won = on_won

    async def run(self) -> None:
        attempt = self.attempt
        with tracing.attempt_span(attempt) as span:
            try:
                await self._call()
            finally:
                self.worker.in_hand.let_go(self.record)
                tracing.finish_attempt(span, self.record.ended or attempt)

    async def not_called(self) -> None:
        """Stopped before its provider was called (its task never ran, or its request could
        not be built and that end could not be recorded): recorded cancelled, nothing sent."""
        await self._end(
            AttemptState.CANCELLED,
            EndReason.NOT_SENT,
            time.perf_counter(),
            NOT_CALLED,
            phase=CallPhase.NOT_CALLED,
        )

    async def _call(self) -> None:
        attempt, record = self.attempt, self.record
        began = time.perf_counter()
        try:
            timeout = self.worker.limits.timeout_s(self.task, attempt.provider, self.deadline)
            assert self.request is not None, "the request is built before any attempt row"
            request = self.task.for_attempt(self.request, self.job, timeout)
        except Exception as exc:  # nothing was sent: a definite not_sent failure
            record.move(CallPhase.UNBUILT)
            await self._end(
                AttemptState.FAILED,
                EndReason.NOT_SENT,
                began,
                "the request could not be built, nothing was sent",
                detail=f"the request could not be built, nothing was sent: {exc}",
            )
            return
        record.move(CallPhase.CALLING)
        try:
            async with asyncio.timeout(None if timeout is None else timeout + GUARD_S):
                completion = await self.provider.complete(request)
        except TimeoutError:
            record.move(CallPhase.ANSWERED)
            message = f"no answer within {timeout:.1f}s: the request may have run"
            await self.health.record(
                attempt.provider, OutcomeUnknown(message, provider=attempt.provider)
            )
            await self._end(AttemptState.UNKNOWN, EndReason.UNKNOWN, began, message, timed_out=True)
        except ProviderError as exc:
            record.move(CallPhase.ANSWERED)
            await self.health.record(attempt.provider, exc)
            verdict = None
            if isinstance(exc, InvalidOutput):
                verdict = self.task.live_verdict(
                    attempt.id,
                    attempt.provider,
                    f"{exc.check}: {exc}",
                    request=self.request,
                    prompt_tokens=exc.prompt_tokens,
                )
            await self._failed(
                exc.kind,
                began,
                provider_failure(exc),
                output=exc.answer,
                detail=str(exc),
                verdict=verdict,
            )
        except asyncio.CancelledError:
            await self._end_cancelled(began)
            raise
        except CassetteMiss:
            record.move(CallPhase.ANSWERED)
            log.error("cassette miss in attempt %s: recording is incomplete", attempt.id)
            await self._end(
                AttemptState.UNKNOWN, EndReason.CASSETTE_MISS, began, "request not in the cassette"
            )
            raise
        except Exception as exc:  # a provider bug: we cannot know whether it ran (I3)
            record.move(CallPhase.ANSWERED)
            log.exception("provider %s raised unexpectedly", attempt.provider)
            await self._end(
                AttemptState.UNKNOWN,
                EndReason.UNKNOWN,
                began,
                f"provider {attempt.provider} failed unexpectedly: the outcome is unknown",
                detail=f"provider raised {type(exc).__name__}: {exc}",
            )
        else:
            record.move(CallPhase.ANSWERED)
            await self.health.record(attempt.provider, None)
            await self._succeed(completion, began)

    async def _failed(
        self,
        kind: ErrorKind,
        began: float,
        error: str,
        output: Any = None,
        detail: str | None = None,
        verdict: LiveVerdict | None = None,
    ) -> None:
        """A failed call, recorded as what it proves (`policy.ended_state`): `error` is its
        summary, `detail` what the provider said (router/disclosure.py); `verdict`, for an
        answer that broke the contract, how (live evidence of the provider, router/watch.py)."""
        state = ended_state(kind, exclusive=self.task.policy.exclusive)
        if kind is ErrorKind.REJECTED and state is AttemptState.UNKNOWN:
            error += (
                "; the provider may have acted and the task is exclusive: check it, then "
                "resolve this attempt (succeeded with the result, or failed)"
            )
        reason = EndReason.of_error(kind)
        await self._end(state, reason, began, error, output=output, detail=detail, verdict=verdict)

    async def _succeed(self, completion: Completion, began: float) -> None:
        attempt = self.attempt
        # The configured keys leave the answer before anything judges or stores it: the
        # contract judges what an owner would get, so a key in an enum field breaks the
        # contract instead of reaching the owner (docs/operations.md, secrets in answers).
        output = scrub_output(completion.output)
        problems = self.task.output_problems(output)
        verdict = self.task.live_verdict(
            attempt.id,
            attempt.provider,
            "; ".join(problems[:3]) or None,
            request=self.request,
            prompt_tokens=completion.usage.prompt_tokens,
        )
        if problems:
            await self._failed(
                ErrorKind.REJECTED,
                began,
                broken_contract(attempt.provider),
                output=output,
                detail="output breaks the contract: " + "; ".join(problems[:3]),
                verdict=verdict,
            )
            return
        cost = answered_usage(completion, attempt.provider, (time.perf_counter() - began) * 1000)
        try:
            outcome = await persist(
                lambda: self.store.finish_attempt_cas(attempt.id, output, cost, verdict=verdict)
            )
        except Exception as exc:
            if not is_transient(exc):
                raise
            await self._unrecorded(output, cost, began, exc, verdict)
            return
        if outcome.won:
            self.on_won(outcome.job)
        else:
            log.info(
                "attempt %s of job %s lost the race to %s",
                attempt.id,
                self.job.id,
                outcome.job.winner_attempt_id,
            )
        self.record.end(outcome.attempt)
        self.worker.metric(outcome.attempt, self.job.task, False)

    async def _unrecorded(
        self,
        output: Any,
        usage: AttemptUsage,
        began: float,
        error: BaseException,
        verdict: LiveVerdict | None,
    ) -> None:
        """The answer's result could not be recorded: keep the answer on its attempt, marked
        unknown ("answered; result could not be recorded") for an operator to resolve with it,
        and its verdict (it answered; a CAS that did commit makes this end a no-op); if even
        that cannot be written, the answer goes to the log, whole, at CRITICAL."""
        attempt = self.attempt
        summary = (
            "answered; the result could not be recorded: resolve this attempt as "
            "succeeded with its output"
        )
        message = (
            f"answered; the result could not be recorded ({error}): resolve this "
            "attempt as succeeded with its output"
        )
        try:
            await self._end(
                AttemptState.UNKNOWN,
                EndReason.UNRECORDED,
                began,
                summary,
                output=output,
                detail=message,
                usage=usage,
                verdict=verdict,
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

    async def _end_cancelled(self, began: float) -> None:
        reason = self.record.cancel_reason
        if reason is None:  # the router is shutting down: we do not know what the provider did
            await self._end(
                AttemptState.UNKNOWN,
                EndReason.UNKNOWN,
                began,
                "the router stopped while the request was in flight; the provider may have acted",
            )
        else:
            await self._end(AttemptState.CANCELLED, EndReason.CANCELLED, began, reason)

    async def _end(
        self,
        state: AttemptState,
        kind: EndReason,
        began: float,
        error: str,
        timed_out: bool = False,
        output: Any = None,
        detail: str | None = None,
        usage: AttemptUsage | None = None,
        verdict: LiveVerdict | None = None,
        phase: CallPhase = CallPhase.RECORDED,
    ) -> None:
        """Record an attempt's end: `error` is the summary anyone may read, `detail` the raw
        text behind it (operators only, router/disclosure.py), scrubbed here for every
        outcome (a provider bug's or a store's exception text may quote a key); `usage`, what
        an answered call used (else only the latency since `began`); `phase`, the call's once
        the end is written."""
        attempt = self.attempt
        if usage is None:
            usage = AttemptUsage(
                latency_ms=(time.perf_counter() - began) * 1000, cost_unknown=NO_ANSWER_USAGE
            )
        done = await persist(
            lambda: self.store.finish_attempt(
                attempt.id,
                state,
                error_kind=kind,
                error=error,
                usage=usage,
                output=output,
                error_detail=None if detail is None else scrub(detail),
                verdict=verdict,
            )
        )
        self.record.end(done, phase)
        self.worker.metric(done, self.job.task, timed_out)


def answered_usage(completion: Completion, provider: str, latency_ms: float) -> AttemptUsage:
    """What an answered attempt records of its use: the cost as its provider priced it
    (`jobrouter.providers.pricing`); a provider that reported neither a cost nor why not
    has an unknown cost saying so (never 0)."""
    usage = completion.usage
    unknown = None
    if usage.cost_usd is None:
        unknown = usage.cost_unknown or f"provider {provider} reported no cost"
    return AttemptUsage(
        latency_ms=latency_ms,
        model=completion.model,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost_usd=usage.cost_usd,
        cost_source=usage.cost_source,
        cost_unknown=unknown,
    )
