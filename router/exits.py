"""The CLI's exit codes, one table, so that a script can tell a failed job from an unknown one
from a refused submit without reading the output (README.md lists them).

States are data: the code of a job is looked up by its state, never derived from it.
"""

from __future__ import annotations

from enum import IntEnum

from jobrouter.errors import (
    BudgetExhausted,
    IdempotencyConflict,
    JobRefused,
    JobRouterError,
    NoEligibleProvider,
    SpendQueryInvalid,
)
from jobrouter.states import JobState

LOG_LEVEL_ENV = "JOBROUTER_LOG_LEVEL"


class Exit(IntEnum):
    OK = 0  # done; for a command that waits for a job: the job succeeded
    ERROR = 1  # the command could not do its work: config, database, no such job or attempt
    USAGE = 2  # the command line is wrong (click's own code; a bad spend report query too)
    FAILED = 3  # the job failed: every allowed provider definitely failed or was refused
    UNKNOWN = 4  # the job needs attention: an attempt's outcome is unknown (resolve or cancel)
    REFUSED = 5  # nothing was run: the door refused the job, the key was used for another
    # payload, or no provider may run it
    PENDING = 6  # the job is still queued or running when the wait ended
    CANCELLED = 7  # the job was cancelled
    OVER_BUDGET = 8  # nothing was run: a budget covering the job has nothing left this period


_BY_STATE = {
    JobState.SUCCEEDED: Exit.OK,
    JobState.FAILED: Exit.FAILED,
    JobState.UNKNOWN: Exit.UNKNOWN,
    JobState.QUEUED: Exit.PENDING,
    JobState.RUNNING: Exit.PENDING,
    JobState.CANCELLED: Exit.CANCELLED,
}


def exit_code_of_state(state: JobState) -> Exit:
    return _BY_STATE[state]


def exit_code_of(exc: JobRouterError) -> Exit:
    if isinstance(exc, BudgetExhausted):
        return Exit.OVER_BUDGET
    if isinstance(exc, SpendQueryInvalid):  # checked by the domain, a usage error all the same
        return Exit.USAGE
    if isinstance(exc, IdempotencyConflict | NoEligibleProvider | JobRefused):
        return Exit.REFUSED
    return Exit.ERROR
