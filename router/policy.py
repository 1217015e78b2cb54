"""The failover decision: a pure function of (task policy, attempt history, eligibility, clock).

No I/O here. The engine asks `decide(...)` what to do next and carries it out; every rule of
DESIGN.md's failover policy is a line in this module and a unit test without a database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from jobrouter.disclosure import attempts_summary
from jobrouter.models import Attempt
from jobrouter.providers import ErrorKind
from jobrouter.states import AttemptState, JobState


@dataclass(frozen=True)
class TaskPolicy:
    providers: tuple[str, ...]
    max_attempts: int = 3
    exclusive: bool = True  # contract side_effects: external (I4)
    hedge_after: float | None = None  # only honoured when not exclusive


@dataclass(frozen=True)
class Eligibility:
    """Whether a provider may get a new attempt now; `retry_at` set means "not yet, later"."""

    ok: bool
    reason: str = ""
    retry_at: float | None = None


@dataclass(frozen=True)
class Start:
    provider: str
    hedge: bool = False


@dataclass(frozen=True)
class Wait:
    """Nothing to start now: wait for an attempt in flight, or until `until` (epoch seconds)."""

    until: float | None
    reason: str


@dataclass(frozen=True)
class Finish:
    state: JobState  # failed (terminal) or unknown (needs attention)
    error: str  # the summary: our own words (router/disclosure.py)
    detail: str | None = None  # the attempts' raw detail behind it: operators only


Decision = Start | Wait | Finish


def by_price(providers: Sequence[str], prices: Mapping[str, float | None]) -> tuple[str, ...]:
    """A task's providers cheapest first (`[tasks.NAME] order = "cost"`): `prices` is each
    one's comparable price (None: unknown), and an unknown price goes last, since nothing says
    it is cheap. The sort is stable: equal prices, unknown ones too, keep the configured order."""
    return tuple(sorted(providers, key=lambda name: _price_key(prices.get(name))))


def _price_key(price: float | None) -> tuple[bool, float]:
    return (price is None, 0.0 if price is None else price)


def ended_state(kind: ErrorKind, *, exclusive: bool) -> AttemptState:
    """How a failed call is recorded. Only `not_sent` (the provider provably did not act) is a
    plain failure for every task. An answer that may have acted (`rejected`: a 5xx, an unusable
    answer) is a failure to fail over from only when repeating is harmless; for an exclusive
    task it is `unknown`, which holds the job for an operator (I4). `unknown` stays unknown."""
    if kind is ErrorKind.NOT_SENT:
        return AttemptState.FAILED
    if kind is ErrorKind.REJECTED and not exclusive:
        return AttemptState.FAILED
    return AttemptState.UNKNOWN


def unbuildable(attempts: Sequence[Attempt], why: str) -> Decision:
    """The job's provider request cannot be built (nothing can be sent to anyone): wait for
    attempts in flight, else end as their outcomes allow (unknown ones keep it unknown)."""
    in_flight = [a for a in attempts if a.state is AttemptState.STARTED]
    if in_flight:
        return Wait(None, f"the request cannot be built ({why}); waiting for attempts in flight")
    unknown = [a for a in attempts if a.state is AttemptState.UNKNOWN]
    return _exhausted(
        attempts, unknown, f"the provider request could not be built, nothing was sent: {why}"
    )


def decide(
    policy: TaskPolicy,
    attempts: Sequence[Attempt],
    eligibility: Mapping[str, Eligibility],
    *,
    now: float,
    deadline_at: float | None,
) -> Decision:
    in_flight = [a for a in attempts if a.state is AttemptState.STARTED]
    unknown = [a for a in attempts if a.state is AttemptState.UNKNOWN]
    if policy.exclusive:
        if in_flight:
            return Wait(None, f"attempt {in_flight[-1].id} is in flight (exclusive task)")
        if unknown:
            return Finish(JobState.UNKNOWN, _unknown_message(unknown, exclusive=True))
    if deadline_at is not None and now >= deadline_at:
        if in_flight:
            return Wait(None, "deadline passed; waiting for attempts in flight to end")
        why = "the job's deadline passed" + _not_used(policy, attempts, eligibility)
        return _exhausted(attempts, unknown, why)
    budget_left = len(attempts) < policy.max_attempts
    candidate = _next_candidate(policy, attempts, eligibility) if budget_left else None
    if in_flight:
        return _while_in_flight(policy, in_flight, candidate, now)
    if candidate is not None:
        return Start(candidate)
    later = _earliest_recovery(policy, attempts, eligibility) if budget_left else None
    if later is not None:
        until = later if deadline_at is None else min(later, deadline_at)
        return Wait(until, "no eligible provider can be called now; waiting for one to recover")
    if not budget_left:
        return _exhausted(attempts, unknown, f"all {policy.max_attempts} attempts used")
    return _exhausted(attempts, unknown, _refusals(policy, attempts, eligibility))


def _while_in_flight(
    policy: TaskPolicy, in_flight: Sequence[Attempt], candidate: str | None, now: float
) -> Decision:
    if policy.exclusive or policy.hedge_after is None or candidate is None:
        return Wait(None, f"attempt {in_flight[-1].id} is in flight")
    hedge_at = max(a.started_at.timestamp() for a in in_flight) + policy.hedge_after
    if now >= hedge_at:
        return Start(candidate, hedge=True)
    return Wait(hedge_at, f"hedging to {candidate} if still silent after {policy.hedge_after}s")


def _used(attempts: Sequence[Attempt]) -> set[str]:
    """Each provider gets one attempt per job: retrying a call is the provider layer's job (one
    retry layer), and a provider that timed out or failed is not asked again; an operator's
    "it did not happen" frees the job to fail over, not to hit the same provider."""
    return {a.provider for a in attempts}


def _next_candidate(
    policy: TaskPolicy, attempts: Sequence[Attempt], eligibility: Mapping[str, Eligibility]
) -> str | None:
    used = _used(attempts)
    for name in policy.providers:
        verdict = eligibility.get(name)
        if name not in used and verdict is not None and verdict.ok:
            return name
    return None


def _earliest_recovery(
    policy: TaskPolicy, attempts: Sequence[Attempt], eligibility: Mapping[str, Eligibility]
) -> float | None:
    used = _used(attempts)
    times = [
        verdict.retry_at
        for name in policy.providers
        if name not in used
        and (verdict := eligibility.get(name)) is not None
        and verdict.retry_at is not None
    ]
    return min(times, default=None)


def _reasons(
    policy: TaskPolicy,
    attempts: Sequence[Attempt],
    eligibility: Mapping[str, Eligibility],
    *,
    tried: bool,
) -> list[str]:
    """Why each provider was not used: with `tried`, the tried ones say so too."""
    used = _used(attempts)
    parts = []
    for name in policy.providers:
        verdict = eligibility.get(name)
        if name in used:
            if tried:
                parts.append(f"{name}: already tried")
        elif verdict is None:
            parts.append(f"{name}: not configured")
        elif not verdict.ok:
            parts.append(f"{name}: {verdict.reason}")
        elif not tried:
            parts.append(f"{name}: not tried before the deadline")
    return parts


def _refusals(
    policy: TaskPolicy, attempts: Sequence[Attempt], eligibility: Mapping[str, Eligibility]
) -> str:
    parts = _reasons(policy, attempts, eligibility, tried=True)
    return "no provider left to try (" + "; ".join(parts) + ")"


def _not_used(
    policy: TaskPolicy, attempts: Sequence[Attempt], eligibility: Mapping[str, Eligibility]
) -> str:
    """Why each provider never tried was not used (tried ones are in the attempts' errors)."""
    parts = _reasons(policy, attempts, eligibility, tried=False)
    return f" (not used: {'; '.join(parts)})" if parts else ""


def _exhausted(attempts: Sequence[Attempt], unknown: Sequence[Attempt], why: str) -> Finish:
    if unknown:  # I3: an unknown outcome is never turned into a failure
        return Finish(JobState.UNKNOWN, f"{why}; " + _unknown_message(unknown, exclusive=False))
    if not attempts:
        return Finish(JobState.FAILED, why)
    summary, detail = (attempts_summary(attempts, detail=d) for d in (False, True))
    return Finish(
        JobState.FAILED,
        f"{why}; attempts: {summary}",
        None if detail == summary else f"{why}; attempts: {detail}",
    )


def _unknown_message(unknown: Sequence[Attempt], *, exclusive: bool) -> str:
    ids = ", ".join(f"{a.id} ({a.provider})" for a in unknown)
    head = "an external side effect may have happened" if exclusive else "outcome unknown"
    return (
        f"{head} for attempt {ids}; check the provider, then `jobrouter resolve ATTEMPT_ID "
        "--outcome succeeded|failed` or cancel the job"
    )
