"""`jobrouter.policy.decide` as a pure function: histories are built by hand, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from jobrouter.models import Attempt
from jobrouter.policy import (
    Eligibility,
    Finish,
    Start,
    TaskPolicy,
    Wait,
    decide,
    ended_state,
    unbuildable,
)
from jobrouter.providers import ErrorKind
from jobrouter.states import AttemptState, JobState

T0 = 1_700_000_000.0
OK = Eligibility(True)


def attempt(
    provider: str,
    state: AttemptState,
    *,
    seq: int = 1,
    started: float = T0,
    error_kind: str | None = None,
    error: str | None = None,
) -> Attempt:
    return Attempt(
        id=f"att-{seq}-{provider}",
        job_id="job-1",
        seq=seq,
        provider=provider,
        state=state,
        error_kind=error_kind,
        error=error,
        started_at=datetime.fromtimestamp(started, UTC),
    )


def history(*items: tuple[str, AttemptState]) -> list[Attempt]:
    return [attempt(p, s, seq=i + 1, started=T0 + i) for i, (p, s) in enumerate(items)]


def all_ok(*names: str) -> dict[str, Eligibility]:
    return {name: OK for name in names}


def run(
    policy: TaskPolicy,
    attempts: Sequence[Attempt],
    eligibility: Mapping[str, Eligibility],
    *,
    now: float = T0 + 100,
    deadline_at: float | None = None,
) -> Start | Wait | Finish:
    return decide(policy, attempts, eligibility, now=now, deadline_at=deadline_at)


EXCLUSIVE = TaskPolicy(providers=("a", "b", "c"), exclusive=True)
SHARED = TaskPolicy(providers=("a", "b", "c"), exclusive=False)


# ---- how a failed call is recorded, and a request that cannot be built -----------------------


def test_a_failed_call_is_recorded_as_its_kind_and_the_task_allow() -> None:
    """Only `not_sent` is a plain failure everywhere; `rejected` is a failure for a shared task
    and `unknown` for an exclusive one (I4); `unknown` stays unknown. Kills mutants
    `router.policy.x_ended_state` 1 (`is not NOT_SENT`) and 2 (`REJECTED or not exclusive`)."""
    assert ended_state(ErrorKind.NOT_SENT, exclusive=True) is AttemptState.FAILED
    assert ended_state(ErrorKind.NOT_SENT, exclusive=False) is AttemptState.FAILED
    assert ended_state(ErrorKind.REJECTED, exclusive=False) is AttemptState.FAILED
    assert ended_state(ErrorKind.REJECTED, exclusive=True) is AttemptState.UNKNOWN
    assert ended_state(ErrorKind.UNKNOWN, exclusive=False) is AttemptState.UNKNOWN
    assert ended_state(ErrorKind.UNKNOWN, exclusive=True) is AttemptState.UNKNOWN


def test_a_request_that_cannot_be_built_waits_for_attempts_in_flight() -> None:
    """Kills the `router.policy.x_unbuildable` mutants of the in-flight branch."""
    attempts = history(("a", AttemptState.FAILED), ("b", AttemptState.STARTED))
    decision = unbuildable(attempts, "template error")
    assert decision == Wait(
        None, "the request cannot be built (template error); waiting for attempts in flight"
    )


def test_a_request_that_cannot_be_built_fails_the_job_or_keeps_it_unknown() -> None:
    """Nothing was sent: the job fails with the reason and the attempts so far, unless an
    attempt's outcome is unknown (I3: never turned into a failure). Kills the
    `router.policy.x_unbuildable` mutants of the ending branch."""
    decision = unbuildable(history(("a", AttemptState.FAILED)), "template error")
    assert decision == Finish(
        JobState.FAILED,
        "the provider request could not be built, nothing was sent: "
        "template error; attempts: a: failed",
    )
    attempts = history(("a", AttemptState.FAILED), ("b", AttemptState.UNKNOWN))
    decision = unbuildable(attempts, "template error")
    assert isinstance(decision, Finish)
    assert decision.state is JobState.UNKNOWN
    assert decision.error.startswith(
        "the provider request could not be built, nothing was sent: template error; "
        "outcome unknown for attempt att-2-b (b)"
    )
    assert unbuildable([], "template error") == Finish(
        JobState.FAILED, "the provider request could not be built, nothing was sent: template error"
    )


# ---- starting and failing over ----------------------------------------------------------------


def test_first_candidate_is_started() -> None:
    assert run(EXCLUSIVE, [], all_ok("a", "b", "c")) == Start("a")
    assert run(SHARED, [], all_ok("a", "b", "c")) == Start("a")


def test_failover_after_a_failed_attempt() -> None:
    attempts = history(("a", AttemptState.FAILED))
    assert run(EXCLUSIVE, attempts, all_ok("a", "b", "c")) == Start("b")
    attempts = history(("a", AttemptState.FAILED), ("b", AttemptState.FAILED))
    assert run(SHARED, attempts, all_ok("a", "b", "c")) == Start("c")


def test_failover_after_a_cancelled_or_lost_attempt_uses_the_next_provider() -> None:
    attempts = history(("a", AttemptState.CANCELLED))
    assert run(EXCLUSIVE, attempts, all_ok("a", "b", "c")) == Start("b")


def test_exclusive_with_unknown_attempt_finishes_unknown_and_never_starts() -> None:
    attempts = history(("a", AttemptState.UNKNOWN))
    decision = run(EXCLUSIVE, attempts, all_ok("a", "b", "c"))
    assert isinstance(decision, Finish)
    assert decision.state is JobState.UNKNOWN
    assert attempts[0].id in decision.error
    assert "resolve" in decision.error


def test_exclusive_with_unknown_attempt_never_starts_even_with_budget_and_hedging() -> None:
    policy = TaskPolicy(providers=("a", "b"), exclusive=True, hedge_after=0.1, max_attempts=10)
    attempts = history(("a", AttemptState.FAILED), ("b", AttemptState.UNKNOWN))
    decision = run(policy, attempts, all_ok("a", "b"), now=T0 + 1000)
    assert isinstance(decision, Finish)
    assert decision.state is JobState.UNKNOWN


def test_exclusive_with_started_attempt_waits() -> None:
    attempts = history(("a", AttemptState.STARTED))
    decision = run(EXCLUSIVE, attempts, all_ok("a", "b", "c"))
    assert isinstance(decision, Wait)
    assert decision.until is None
    assert attempts[0].id in decision.reason


def test_non_exclusive_unknown_attempt_fails_over_to_next_provider() -> None:
    attempts = history(("a", AttemptState.UNKNOWN))
    assert run(SHARED, attempts, all_ok("a", "b", "c")) == Start("b")


def test_operator_resolved_failure_fails_over_to_the_next_provider() -> None:
    """An operator's "it did not happen" is a definite failure of that provider: the job
    continues with the next one, like after any failed attempt (the lead's brief)."""
    plain = attempt("a", AttemptState.FAILED, error_kind="rejected")
    assert run(EXCLUSIVE, [plain], all_ok("a", "b", "c")) == Start("b")
    resolved = attempt("a", AttemptState.FAILED, error_kind="resolved", error="did not happen")
    assert run(EXCLUSIVE, [resolved], all_ok("a", "b", "c")) == Start("b")


# ---- exhaustion -------------------------------------------------------------------------------


def test_exhausted_with_an_unknown_finishes_unknown_never_failed() -> None:
    policy = TaskPolicy(providers=("a", "b"), exclusive=False)
    attempts = history(("a", AttemptState.UNKNOWN), ("b", AttemptState.FAILED))
    decision = run(policy, attempts, all_ok("a", "b"))
    assert isinstance(decision, Finish)
    assert decision.state is JobState.UNKNOWN  # I3
    assert attempts[0].id in decision.error


def test_exhausted_all_failed_finishes_failed_naming_the_providers() -> None:
    policy = TaskPolicy(providers=("alpha", "beta"), exclusive=True)
    attempts = [
        attempt("alpha", AttemptState.FAILED, seq=1, error_kind="rejected", error="HTTP 500"),
        attempt("beta", AttemptState.FAILED, seq=2, error_kind="not_sent", error="refused"),
    ]
    decision = run(policy, attempts, all_ok("alpha", "beta"))
    assert isinstance(decision, Finish)
    assert decision.state is JobState.FAILED
    for text in ("alpha", "beta", "HTTP 500", "refused"):
        assert text in decision.error


def test_ineligible_providers_are_skipped() -> None:
    eligibility = {"a": Eligibility(False, "not certified for caption"), "b": OK, "c": OK}
    assert run(EXCLUSIVE, [], eligibility) == Start("b")


def test_ineligible_providers_are_named_in_the_failure() -> None:
    eligibility = {
        "a": OK,
        "b": Eligibility(False, "not certified for caption"),
        "c": Eligibility(False, "circuit open"),
    }
    attempts = history(("a", AttemptState.FAILED))
    decision = run(EXCLUSIVE, attempts, eligibility)
    assert isinstance(decision, Finish)
    assert decision.state is JobState.FAILED
    assert "b: not certified for caption" in decision.error
    assert "c: circuit open" in decision.error
    assert "a: already tried" in decision.error


def test_unconfigured_provider_is_named_and_never_started() -> None:
    decision = run(TaskPolicy(providers=("ghost",)), [], {})
    assert isinstance(decision, Finish)
    assert decision.state is JobState.FAILED
    assert "ghost: not configured" in decision.error


def test_no_provider_at_all_with_nothing_tried_fails_the_job() -> None:
    eligibility = {name: Eligibility(False, "not certified") for name in ("a", "b", "c")}
    decision = run(EXCLUSIVE, [], eligibility)
    assert isinstance(decision, Finish)
    assert decision.state is JobState.FAILED


def test_provider_with_retry_at_waits_instead_of_failing() -> None:
    eligibility = {"a": OK, "b": Eligibility(False, "circuit open", retry_at=T0 + 130)}
    policy = TaskPolicy(providers=("a", "b"))
    attempts = history(("a", AttemptState.FAILED))
    decision = run(policy, attempts, eligibility, now=T0 + 100)
    assert isinstance(decision, Wait)
    assert decision.until == T0 + 130


def test_retry_at_wait_is_capped_by_the_deadline() -> None:
    eligibility = {"a": OK, "b": Eligibility(False, "rate limited", retry_at=T0 + 500)}
    policy = TaskPolicy(providers=("a", "b"))
    attempts = history(("a", AttemptState.FAILED))
    decision = run(policy, attempts, eligibility, now=T0 + 100, deadline_at=T0 + 200)
    assert isinstance(decision, Wait)
    assert decision.until == T0 + 200


def test_retry_at_of_an_already_used_provider_does_not_wait() -> None:
    eligibility = {"a": Eligibility(False, "circuit open", retry_at=T0 + 130)}
    policy = TaskPolicy(providers=("a",))
    attempts = history(("a", AttemptState.FAILED))
    decision = run(policy, attempts, eligibility)
    assert isinstance(decision, Finish)
    assert decision.state is JobState.FAILED


def test_max_attempts_is_respected() -> None:
    policy = TaskPolicy(providers=("a", "b", "c"), max_attempts=2)
    attempts = history(("a", AttemptState.FAILED), ("b", AttemptState.FAILED))
    decision = run(policy, attempts, all_ok("a", "b", "c"))
    assert isinstance(decision, Finish)
    assert decision.state is JobState.FAILED
    assert "2 attempts" in decision.error


def test_max_attempts_used_does_not_wait_for_a_provider_to_recover() -> None:
    """With every attempt used, a provider never tried that recovers later is no reason to
    wait: the job fails now. Kills mutant `router.policy.x_decide` 66 (`_earliest_recovery`
    computed with no attempt budget left, which turned this into a `Wait`)."""
    policy = TaskPolicy(providers=("a", "b"), max_attempts=1)
    eligibility = {"a": OK, "b": Eligibility(False, "circuit open", retry_at=T0 + 130)}
    attempts = history(("a", AttemptState.FAILED))
    decision = run(policy, attempts, eligibility, now=T0 + 100)
    assert isinstance(decision, Finish)
    assert decision.state is JobState.FAILED
    assert "all 1 attempts used" in decision.error


def test_max_attempts_with_an_unknown_finishes_unknown() -> None:
    policy = TaskPolicy(providers=("a", "b", "c"), max_attempts=2, exclusive=False)
    attempts = history(("a", AttemptState.UNKNOWN), ("b", AttemptState.FAILED))
    decision = run(policy, attempts, all_ok("a", "b", "c"))
    assert isinstance(decision, Finish)
    assert decision.state is JobState.UNKNOWN


def test_max_attempts_reached_with_one_in_flight_waits_without_hedging() -> None:
    policy = TaskPolicy(providers=("a", "b"), max_attempts=1, exclusive=False, hedge_after=0.1)
    attempts = history(("a", AttemptState.STARTED))
    decision = run(policy, attempts, all_ok("a", "b"), now=T0 + 50)
    assert isinstance(decision, Wait)
    assert decision.until is None


# ---- hedging ----------------------------------------------------------------------------------

HEDGED = TaskPolicy(providers=("a", "b"), exclusive=False, hedge_after=0.2)


def test_hedge_starts_after_silence() -> None:
    attempts = [attempt("a", AttemptState.STARTED, started=T0)]
    assert run(HEDGED, attempts, all_ok("a", "b"), now=T0 + 0.3) == Start("b", hedge=True)
    assert run(HEDGED, attempts, all_ok("a", "b"), now=T0 + 0.2) == Start("b", hedge=True)


def test_hedge_not_yet_waits_until_start_plus_hedge_after() -> None:
    attempts = [attempt("a", AttemptState.STARTED, started=T0)]
    decision = run(HEDGED, attempts, all_ok("a", "b"), now=T0 + 0.05)
    assert isinstance(decision, Wait)
    assert decision.until == T0 + 0.2


def test_exclusive_never_hedges() -> None:
    policy = TaskPolicy(providers=("a", "b"), exclusive=True, hedge_after=0.2)
    attempts = [attempt("a", AttemptState.STARTED, started=T0)]
    for now in (T0 + 0.1, T0 + 0.3, T0 + 1000):
        decision = run(policy, attempts, all_ok("a", "b"), now=now)
        assert isinstance(decision, Wait)
        assert decision.until is None


def test_without_hedge_after_a_started_attempt_is_waited_for() -> None:
    attempts = [attempt("a", AttemptState.STARTED, started=T0)]
    decision = run(SHARED, attempts, all_ok("a", "b", "c"), now=T0 + 1000)
    assert isinstance(decision, Wait)
    assert decision.until is None


def test_hedge_with_no_candidate_left_waits_for_the_flight() -> None:
    attempts = [attempt("a", AttemptState.STARTED, started=T0)]
    eligibility = {"a": OK, "b": Eligibility(False, "not certified")}
    decision = run(HEDGED, attempts, eligibility, now=T0 + 5)
    assert isinstance(decision, Wait)
    assert decision.until is None


# ---- deadline ---------------------------------------------------------------------------------


def test_deadline_passed_fails_the_job() -> None:
    attempts = history(("a", AttemptState.FAILED))
    decision = run(EXCLUSIVE, attempts, all_ok("a", "b", "c"), now=T0 + 10, deadline_at=T0 + 10)
    assert isinstance(decision, Finish)
    assert decision.state is JobState.FAILED
    assert "deadline" in decision.error


def test_deadline_passed_names_each_provider_not_used_and_why() -> None:
    attempts = history(("a", AttemptState.FAILED))
    eligibility = {
        "a": OK,
        "b": Eligibility(False, "circuit open after 5 failures", retry_at=T0 + 60),
        "c": OK,
    }
    decision = run(SHARED, attempts, eligibility, now=T0 + 10, deadline_at=T0 + 10)
    assert isinstance(decision, Finish)
    assert decision.state is JobState.FAILED
    assert "b: circuit open after 5 failures" in decision.error
    assert "c: not tried before the deadline" in decision.error
    assert "attempts: a: " in decision.error


def test_deadline_passed_message_lists_the_providers_not_used_or_none() -> None:
    """The exact text: the providers not used, separated by "; ", and no "(not used: )" when
    every provider was tried. Kills mutants `router.policy.x__not_used` 12 (the list always
    added) and 14 (its separator changed)."""
    attempts = history(("a", AttemptState.FAILED))
    eligibility = {"a": OK, "b": Eligibility(False, "circuit open"), "c": OK}
    decision = run(SHARED, attempts, eligibility, now=T0 + 10, deadline_at=T0 + 10)
    assert decision == Finish(
        JobState.FAILED,
        "the job's deadline passed (not used: b: circuit "
        "open; c: not tried before the deadline); attempts: a: failed",
    )
    attempts = history(
        ("a", AttemptState.FAILED), ("b", AttemptState.FAILED), ("c", AttemptState.FAILED)
    )
    decision = run(SHARED, attempts, all_ok("a", "b", "c"), now=T0 + 10, deadline_at=T0 + 10)
    assert decision == Finish(
        JobState.FAILED, "the job's deadline passed; attempts: a: failed; b: failed; c: failed"
    )


def test_an_unknown_outcome_tells_the_operator_what_may_have_happened_and_what_to_do() -> None:
    """The exact text an operator reads: every unknown attempt with its provider, what may have
    happened (an exclusive task may have acted) and the command that resolves it. Kills mutants
    `router.policy.x__unknown_message` 3-12 and `x__not_used` 15."""
    attempts = history(("a", AttemptState.UNKNOWN))
    assert run(EXCLUSIVE, attempts, all_ok("a", "b", "c")) == Finish(
        JobState.UNKNOWN,
        "an external side effect may have happened for attempt att-1-a (a); check the provider, "
        "then `jobrouter resolve ATTEMPT_ID --outcome succeeded|failed` or cancel the job",
    )
    attempts = history(
        ("a", AttemptState.UNKNOWN), ("b", AttemptState.UNKNOWN), ("c", AttemptState.FAILED)
    )
    decision = run(SHARED, attempts, all_ok("a", "b", "c"), now=T0 + 10, deadline_at=T0 + 10)
    assert decision == Finish(
        JobState.UNKNOWN,
        "the job's deadline passed; outcome unknown for attempt att-1-a (a), att-2-b (b); check "
        "the provider, then `jobrouter resolve ATTEMPT_ID --outcome succeeded|failed` or cancel "
        "the job",
    )


def test_no_provider_left_says_why_for_each_one_exactly() -> None:
    """Kills mutants `router.policy.x__refusals` 16 (the separator) and 17 (the closing
    parenthesis)."""
    attempts = [attempt("a", AttemptState.FAILED, error_kind="rejected", error="HTTP 500")]
    eligibility = {"a": OK, "b": Eligibility(False, "not certified")}
    decision = run(TaskPolicy(providers=("a", "b", "c")), attempts, eligibility)
    assert decision == Finish(
        JobState.FAILED,
        "no provider left to try (a: already tried; "
        "b: not certified; c: not configured); attempts: a: rejected "
        "HTTP 500",
    )


def test_each_wait_says_what_it_waits_for() -> None:
    """The reason of a `Wait` is what `jobrouter show` and the job's events tell an operator.
    Kills mutants `router.policy.x_decide` 22, 25, 26, 83, 86, 87 and
    `x__while_in_flight` 5 and 20 (a reason dropped or changed)."""
    hedged = TaskPolicy(providers=("a", "b"), exclusive=False, hedge_after=30.0)
    in_flight = history(("a", AttemptState.STARTED))
    assert run(hedged, in_flight, all_ok("a", "b"), now=T0 + 11, deadline_at=T0 + 10) == Wait(
        None, "deadline passed; waiting for attempts in flight to end"
    )
    assert run(hedged, in_flight, all_ok("a", "b"), now=T0 + 10) == Wait(
        T0 + 30, "hedging to b if still silent after 30.0s"
    )
    assert run(hedged, in_flight, all_ok("a"), now=T0 + 10) == Wait(
        None, "attempt att-1-a is in flight"
    )
    eligibility = {"a": OK, "b": Eligibility(False, "circuit open", retry_at=T0 + 130)}
    assert run(hedged, history(("a", AttemptState.FAILED)), eligibility) == Wait(
        T0 + 130, "no eligible provider can be called now; waiting for one to recover"
    )


def test_deadline_passed_with_an_unknown_attempt_finishes_unknown() -> None:
    attempts = history(("a", AttemptState.UNKNOWN))
    decision = run(SHARED, attempts, all_ok("a", "b", "c"), now=T0 + 11, deadline_at=T0 + 10)
    assert isinstance(decision, Finish)
    assert decision.state is JobState.UNKNOWN


def test_deadline_passed_with_an_attempt_in_flight_waits_for_it() -> None:
    attempts = history(("a", AttemptState.STARTED))
    decision = run(HEDGED, attempts, all_ok("a", "b"), now=T0 + 11, deadline_at=T0 + 10)
    assert isinstance(decision, Wait)
    assert decision.until is None


def test_deadline_not_yet_passed_still_starts() -> None:
    assert run(EXCLUSIVE, [], all_ok("a"), now=T0, deadline_at=T0 + 1) == Start("a")


# ---- properties over random histories ---------------------------------------------------------

PROVIDERS = ("p1", "p2", "p3", "p4")
OPEN = {AttemptState.STARTED, AttemptState.UNKNOWN}

eligibilities = st.builds(
    Eligibility,
    ok=st.booleans(),
    reason=st.sampled_from(["", "not certified", "circuit open"]),
    retry_at=st.none() | st.floats(min_value=T0, max_value=T0 + 100),
)


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[TaskPolicy, list[Attempt], dict[str, Eligibility], float, float | None]:
    providers = tuple(
        draw(st.lists(st.sampled_from(PROVIDERS), min_size=1, max_size=4, unique=True))
    )
    policy = TaskPolicy(
        providers=providers,
        max_attempts=draw(st.integers(1, 6)),
        exclusive=draw(st.booleans()),
        hedge_after=draw(st.none() | st.floats(min_value=0.01, max_value=60)),
    )
    n = draw(st.integers(0, 6))
    attempts = [
        attempt(
            draw(st.sampled_from(PROVIDERS)),
            draw(st.sampled_from(list(AttemptState))),
            seq=i + 1,
            started=T0 + draw(st.floats(min_value=0, max_value=100)),
            # never "resolved": that is the operator's way to free a provider, tested above
            error_kind=draw(st.sampled_from([None, "rejected", "not_sent", "unknown"])),
        )
        for i in range(n)
    ]
    eligibility = draw(st.dictionaries(st.sampled_from(PROVIDERS), eligibilities))
    now = T0 + draw(st.floats(min_value=0, max_value=200))
    deadline = draw(st.none() | st.floats(min_value=T0, max_value=T0 + 300))
    return policy, attempts, eligibility, now, deadline


@settings(max_examples=500, deadline=None)
@given(scenarios())
def test_decide_never_breaks_the_invariants(
    scenario: tuple[TaskPolicy, list[Attempt], dict[str, Eligibility], float, float | None],
) -> None:
    policy, attempts, eligibility, now, deadline = scenario
    decision = decide(policy, attempts, eligibility, now=now, deadline_at=deadline)
    has_open = any(a.state in OPEN for a in attempts)
    has_unknown = any(a.state is AttemptState.UNKNOWN for a in attempts)
    if isinstance(decision, Start):
        assert not (policy.exclusive and has_open), "I4: started beside an open attempt"
        assert decision.provider in policy.providers
        verdict = eligibility.get(decision.provider)
        assert verdict is not None and verdict.ok, "started an ineligible provider"
        assert decision.provider not in {a.provider for a in attempts}, "provider reused"
        assert len(attempts) < policy.max_attempts
        assert deadline is None or now < deadline
        assert not decision.hedge or (not policy.exclusive and policy.hedge_after is not None)
    if isinstance(decision, Finish):
        assert decision.state in (JobState.FAILED, JobState.UNKNOWN)
        if has_unknown:
            assert decision.state is JobState.UNKNOWN, "I3: unknown turned into failed"
        assert not any(a.state is AttemptState.STARTED for a in attempts), "finished in flight"
    in_flight = any(a.state is AttemptState.STARTED for a in attempts)
    if isinstance(decision, Wait) and decision.until is not None and not in_flight:
        assert deadline is None or decision.until <= deadline, "waits past the deadline"
