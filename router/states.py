"""Job, attempt and circuit states and event kinds as data: each state declares `terminal`, one
table lists every allowed transition, each event kind names the job state it announces. Control
flow asks these; nothing derives meaning from names. The values are the strings stored and sent.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobrouter.providers.errors import ErrorKind


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
        """Where a watch ends (`Router.watch`, `Router.wait`, the SSE stream, the client's
        `events` and `wait`): terminal, or waiting for a person. A watch asks it of the latest
        state it knows, so an `unknown` job resolved since is followed to its new end."""
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


class EndReason(StrEnum):
    """Why an attempt ended as it did: every `error_kind` an attempt row can carry (None for an
    attempt that succeeded or was lost). The first three are the provider layer's
    classification (`jobrouter.providers.ErrorKind`, the same strings: what the outcome proves);
    the others are the router's own. The values are the strings stored and sent."""

    NOT_SENT = "not_sent"  # the provider provably did not act
    REJECTED = "rejected"  # it answered, but may have acted
    UNKNOWN = "unknown"  # no answer after the request left; a lease expired; the router stopped
    UNRECORDED = "unrecorded"  # answered, but the result could not be recorded
    CASSETTE_MISS = "cassette_miss"  # a replayed test's request is not in its cassette
    CANCELLED = "cancelled"  # a hedge loser, a cancelled job's open attempt
    RESOLVED = "resolved"  # an operator resolved it failed or cancelled

    @classmethod
    def of_error(cls, kind: ErrorKind) -> EndReason:
        """The end reason of a provider error of `kind` (the same string)."""
        return cls(kind.value)


class CircuitState(StrEnum):
    """A provider's circuit (router/breaker.py), as stored in the `circuits` table."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"

    @property
    def passes_all(self) -> bool:
        """Every call goes through; there is no probe to claim and no cooldown to wait out."""
        return self is CircuitState.CLOSED


class EventKind(StrEnum):
    """The kind of an entry of a job's event log (stored, and sent as the SSE `event:`)."""

    JOB_QUEUED = "job.queued"
    JOB_RUNNING = "job.running"
    JOB_SUCCEEDED = "job.succeeded"
    JOB_FAILED = "job.failed"
    JOB_UNKNOWN = "job.unknown"
    JOB_CANCELLED = "job.cancelled"
    JOB_WAITING = "job.waiting"
    JOB_REOPENED = "job.reopened"
    ATTEMPT_STARTED = "attempt.started"
    ATTEMPT_HEDGED = "attempt.hedged"
    ATTEMPT_SUCCEEDED = "attempt.succeeded"
    ATTEMPT_FAILED = "attempt.failed"
    ATTEMPT_UNKNOWN = "attempt.unknown"
    ATTEMPT_LOST = "attempt.lost"
    ATTEMPT_CANCELLED = "attempt.cancelled"
    PROVIDER_SKIPPED = "provider.skipped"

    @classmethod
    def job_moved(cls, state: JobState) -> EventKind:
        """The event that records a job's move to `state`."""
        return _JOB_MOVED[state]

    @classmethod
    def attempt_ended(cls, state: AttemptState) -> EventKind:
        """The event that records an attempt's end in `state`."""
        return _ATTEMPT_ENDED[state]

    @property
    def job_state(self) -> JobState | None:
        """The job state this event announces, None for a note (waiting, skipped, an attempt)."""
        return _ANNOUNCES.get(self)


_JOB_TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
_ATTEMPT_TERMINAL = frozenset(
    {AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.LOST, AttemptState.CANCELLED}
)

JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.RUNNING, JobState.FAILED, JobState.CANCELLED}),
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


def watch_ends(announced: JobState | None, *, caught_up: bool) -> bool:
    """THE rule for when a watch of a job ends: `Router.watch` (and so the SSE stream), the
    client's `events` and `wait`. `announced` is the job state the latest event seen announced
    (`EventKind.job_state`; None when none did). A terminal state ends the watch at once: nothing
    changes it again (I6). `unknown` (waiting for a person) ends it only once the watcher has
    `caught_up` with the log, so an unknown job resolved since is followed to its new end."""
    if announced is None:
        return False
    return announced.terminal or (caught_up and announced.settled)


def job_can_move(src: JobState, dst: JobState) -> bool:
    return dst in JOB_TRANSITIONS[src]


def attempt_can_move(src: AttemptState, dst: AttemptState) -> bool:
    return dst in ATTEMPT_TRANSITIONS[src]


_JOB_MOVED: dict[JobState, EventKind] = {
    JobState.QUEUED: EventKind.JOB_QUEUED,
    JobState.RUNNING: EventKind.JOB_RUNNING,
    JobState.SUCCEEDED: EventKind.JOB_SUCCEEDED,
    JobState.FAILED: EventKind.JOB_FAILED,
    JobState.UNKNOWN: EventKind.JOB_UNKNOWN,
    JobState.CANCELLED: EventKind.JOB_CANCELLED,
}
# An operator's resolve that lets the policy run again records the move back to running so.
_ANNOUNCES = {kind: state for state, kind in _JOB_MOVED.items()} | {
    EventKind.JOB_REOPENED: JobState.RUNNING
}
_ATTEMPT_ENDED: dict[AttemptState, EventKind] = {
    AttemptState.SUCCEEDED: EventKind.ATTEMPT_SUCCEEDED,
    AttemptState.FAILED: EventKind.ATTEMPT_FAILED,
    AttemptState.UNKNOWN: EventKind.ATTEMPT_UNKNOWN,
    AttemptState.LOST: EventKind.ATTEMPT_LOST,
    AttemptState.CANCELLED: EventKind.ATTEMPT_CANCELLED,
}
