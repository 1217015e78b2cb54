"""Event kinds, circuit states and the rule that ends a watch, against tables written out here:
the strings are the stored and sent ones (event log rows, SSE `event:`, webhook `kind`, the
`circuits` table), so they must not change when the code that makes them does."""

from __future__ import annotations

import pytest

from jobrouter.states import AttemptState, CircuitState, EventKind, JobState, watch_ends

# Every kind the event log holds, with the job state it announces (None: a note).
ANNOUNCES: dict[str, str | None] = {
    "job.queued": "queued",
    "job.running": "running",
    "job.succeeded": "succeeded",
    "job.failed": "failed",
    "job.unknown": "unknown",
    "job.cancelled": "cancelled",
    "job.reopened": "running",  # an operator's resolve lets the policy run again
    "job.waiting": None,
    "attempt.started": None,
    "attempt.hedged": None,
    "attempt.succeeded": None,
    "attempt.failed": None,
    "attempt.unknown": None,
    "attempt.lost": None,
    "attempt.cancelled": None,
    "provider.skipped": None,
}


def test_event_kinds_are_exactly_the_stored_strings() -> None:
    assert {kind.value for kind in EventKind} == set(ANNOUNCES)


@pytest.mark.parametrize("kind", list(ANNOUNCES))
def test_each_kind_announces_its_job_state(kind: str) -> None:
    expected = ANNOUNCES[kind]
    assert EventKind(kind).job_state == (None if expected is None else JobState(expected))


@pytest.mark.parametrize(
    ("state", "kind"),
    [
        ("queued", "job.queued"),
        ("running", "job.running"),
        ("succeeded", "job.succeeded"),
        ("failed", "job.failed"),
        ("unknown", "job.unknown"),
        ("cancelled", "job.cancelled"),
    ],
)
def test_a_job_move_is_recorded_under_the_same_string_as_before(state: str, kind: str) -> None:
    moved = EventKind.job_moved(JobState(state))
    assert moved.value == kind and str(moved) == kind and f"{moved}" == kind
    assert moved.job_state is JobState(state)


@pytest.mark.parametrize(
    ("state", "kind"),
    [
        ("succeeded", "attempt.succeeded"),
        ("failed", "attempt.failed"),
        ("unknown", "attempt.unknown"),
        ("lost", "attempt.lost"),
        ("cancelled", "attempt.cancelled"),
    ],
)
def test_an_attempt_end_is_recorded_under_the_same_string_as_before(state: str, kind: str) -> None:
    assert EventKind.attempt_ended(AttemptState(state)).value == kind


def test_a_started_attempt_has_no_end_event() -> None:
    with pytest.raises(KeyError):
        EventKind.attempt_ended(AttemptState.STARTED)


def test_circuit_states_are_the_stored_strings() -> None:
    assert {state.value: state.passes_all for state in CircuitState} == {
        "closed": True,
        "open": False,
        "half_open": False,
    }


# (announced, caught_up) -> the watch ends. Terminal at once; unknown only when caught up.
WATCH_ENDS = {
    (None, False): False,
    (None, True): False,
    ("queued", False): False,
    ("queued", True): False,
    ("running", False): False,
    ("running", True): False,
    ("unknown", False): False,
    ("unknown", True): True,
    ("succeeded", False): True,
    ("succeeded", True): True,
    ("failed", False): True,
    ("failed", True): True,
    ("cancelled", False): True,
    ("cancelled", True): True,
}


@pytest.mark.parametrize(("announced", "caught_up"), list(WATCH_ENDS))
def test_when_a_watch_ends(announced: str | None, caught_up: bool) -> None:
    state = None if announced is None else JobState(announced)
    assert watch_ends(state, caught_up=caught_up) is WATCH_ENDS[(announced, caught_up)]


def test_a_watch_of_a_caught_up_job_ends_exactly_when_it_is_settled() -> None:
    """`Router.wait` and `JobClient.wait` read the job (caught up by definition) and stop where
    the README says: terminal, or unknown."""
    for state in JobState:
        assert watch_ends(state, caught_up=True) is state.settled
