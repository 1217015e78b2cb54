"""Job and attempt states: every (from, to) pair against a table written out here from
DESIGN.md, not computed from the code's own table."""

from __future__ import annotations

import itertools

import pytest

from jobrouter.states import (
    ATTEMPT_TRANSITIONS,
    JOB_TRANSITIONS,
    AttemptState,
    JobState,
    attempt_can_move,
    job_can_move,
)

Q, R, S, F, U, C = "queued", "running", "succeeded", "failed", "unknown", "cancelled"

# Every allowed job transition; every pair not listed must be refused.
EXPECTED_JOB_MOVES = {
    (Q, R),  # the first attempt starts
    (Q, F),  # no provider may run it at all
    (Q, C),
    (R, S),  # an attempt won the compare-and-swap
    (R, F),  # every allowed provider definitely failed
    (R, U),  # attempts exhausted, at least one outcome unknown
    (R, C),
    (U, R),  # an operator said "it did not happen": the policy runs again
    (U, S),  # an operator said "it did happen", with the result
    (U, F),
    (U, C),
}

JOB_TERMINAL = {Q: False, R: False, S: True, F: True, U: False, C: True}

A_STARTED, A_SUCCEEDED, A_FAILED, A_UNKNOWN, A_LOST, A_CANCELLED = (
    "started",
    "succeeded",
    "failed",
    "unknown",
    "lost",
    "cancelled",
)

EXPECTED_ATTEMPT_MOVES = {
    (A_STARTED, A_SUCCEEDED),
    (A_STARTED, A_FAILED),
    (A_STARTED, A_UNKNOWN),  # timeout, connection lost after sending
    (A_STARTED, A_LOST),  # answered after another attempt won
    (A_STARTED, A_CANCELLED),  # hedge loser, job cancelled
    (A_UNKNOWN, A_SUCCEEDED),  # resolved out of band, or a late answer that still wins
    (A_UNKNOWN, A_FAILED),  # resolved out of band: it did not happen
    (A_UNKNOWN, A_LOST),
    (A_UNKNOWN, A_CANCELLED),
}

ATTEMPT_TERMINAL = {
    A_STARTED: False,
    A_SUCCEEDED: True,
    A_FAILED: True,
    A_UNKNOWN: False,
    A_LOST: True,
    A_CANCELLED: True,
}


def test_job_states_are_exactly_the_designed_ones() -> None:
    assert {state.value for state in JobState} == set(JOB_TERMINAL)


def test_attempt_states_are_exactly_the_designed_ones() -> None:
    assert {state.value for state in AttemptState} == set(ATTEMPT_TERMINAL)


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(JOB_TERMINAL, repeat=2)))
def test_every_job_transition_pair(src: str, dst: str) -> None:
    allowed = (src, dst) in EXPECTED_JOB_MOVES
    assert job_can_move(JobState(src), JobState(dst)) is allowed
    assert (JobState(dst) in JOB_TRANSITIONS[JobState(src)]) is allowed


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(ATTEMPT_TERMINAL, repeat=2)))
def test_every_attempt_transition_pair(src: str, dst: str) -> None:
    allowed = (src, dst) in EXPECTED_ATTEMPT_MOVES
    assert attempt_can_move(AttemptState(src), AttemptState(dst)) is allowed
    assert (AttemptState(dst) in ATTEMPT_TRANSITIONS[AttemptState(src)]) is allowed


@pytest.mark.parametrize("name", list(JOB_TERMINAL))
def test_job_terminal_flag(name: str) -> None:
    state = JobState(name)
    assert state.terminal is JOB_TERMINAL[name]
    assert state.needs_attention is (name == U)
    assert state.settled is (JOB_TERMINAL[name] or name == U)


@pytest.mark.parametrize("name", list(ATTEMPT_TERMINAL))
def test_attempt_terminal_flag(name: str) -> None:
    state = AttemptState(name)
    assert state.terminal is ATTEMPT_TERMINAL[name]
    assert state.open is (not ATTEMPT_TERMINAL[name])


def test_terminal_job_states_have_no_outgoing_transition() -> None:
    for state in JobState:
        if state.terminal:
            assert not JOB_TRANSITIONS[state], state
            assert not any(job_can_move(state, dst) for dst in JobState), state
        else:
            assert JOB_TRANSITIONS[state], f"{state} is not terminal but has no way out"


def test_terminal_attempt_states_have_no_outgoing_transition() -> None:
    for state in AttemptState:
        if state.terminal:
            assert not ATTEMPT_TRANSITIONS[state], state
            assert not any(attempt_can_move(state, dst) for dst in AttemptState), state
        else:
            assert ATTEMPT_TRANSITIONS[state], f"{state} is not terminal but has no way out"


def test_tables_cover_every_state() -> None:
    assert set(JOB_TRANSITIONS) == set(JobState)
    assert set(ATTEMPT_TRANSITIONS) == set(AttemptState)
