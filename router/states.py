"""Job and attempt states as data: each state declares `terminal`, and one table lists every
allowed transition. Control flow asks these tables; nothing derives meaning from names.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in _JOB_TERMINAL

    @property
    def needs_attention(self) -> bool:
        """Not terminal, but nothing more happens until an operator resolves or cancels."""
        return self is JobState.UNKNOWN

    @property
    def settled(self) -> bool:
        """Where a watcher stops: terminal, or waiting for a person."""
        return self.terminal or self.needs_attention


class AttemptState(StrEnum):
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"
    LOST = "lost"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in _ATTEMPT_TERMINAL

    @property
    def open(self) -> bool:
        """Its outcome may still turn out to be a result: blocks an exclusive job (I4)."""
        return not self.terminal


_JOB_TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
_ATTEMPT_TERMINAL = frozenset(
    {AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.LOST, AttemptState.CANCELLED}
)

JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset(
        {JobState.RUNNING, JobState.FAILED, JobState.CANCELLED}
    ),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.FAILED, JobState.UNKNOWN, JobState.CANCELLED}
    ),
    # An operator resolves the unknown attempt: it did happen (succeeded), it did not (the
    # policy runs again: running, or failed when nothing is left), or the job is cancelled.
    JobState.UNKNOWN: frozenset(
        {JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
    ),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}

ATTEMPT_TRANSITIONS: dict[AttemptState, frozenset[AttemptState]] = {
    AttemptState.STARTED: frozenset(
        {
            AttemptState.SUCCEEDED,
            AttemptState.FAILED,
            AttemptState.UNKNOWN,
            AttemptState.LOST,
            AttemptState.CANCELLED,
        }
    ),
    AttemptState.UNKNOWN: frozenset(
        {AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.LOST, AttemptState.CANCELLED}
    ),
    AttemptState.SUCCEEDED: frozenset(),
    AttemptState.FAILED: frozenset(),
    AttemptState.LOST: frozenset(),
    AttemptState.CANCELLED: frozenset(),
}


def job_can_move(src: JobState, dst: JobState) -> bool:
    return dst in JOB_TRANSITIONS[src]


def attempt_can_move(src: AttemptState, dst: AttemptState) -> bool:
    return dst in ATTEMPT_TRANSITIONS[src]
