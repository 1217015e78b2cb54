"""An operator's resolution of an `unknown` attempt, as a value checked once, here, for every
edge (Python API, HTTP, CLI, console): what became of the attempt (`outcome`), the result a
`succeeded` one made, what the operator checked (`note`) and who they are (`by`).

The store applies it in ONE transaction (router/store/attempts.py: resolve_attempt): the
attempt's end, its record (note and who, on the attempt and in the job's events) and the job's
move (won by the compare-and-swap, or reopened for the policy to decide again). No crash can
leave the job `unknown` with no `unknown` attempt left to resolve.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from jobrouter.errors import ResolutionInvalid
from jobrouter.providers.redact import scrub_output
from jobrouter.states import AttemptState

Outcome = Literal["succeeded", "failed", "cancelled"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)


@dataclass(frozen=True)
class Resolution:
    attempt_id: str
    outcome: AttemptState
    result: Any
    note: str
    by: str

    def record(self) -> dict[str, str]:
        """What the job's events keep of it (the result is the job's, not the log's)."""
        return {"outcome": self.outcome.value, "note": self.note, "by": self.by}


def by_token(token_id: str) -> str:
    """Who resolved, over HTTP and in the console: the token's id (never the token)."""
    return f"token:{token_id}"


def by_os_user() -> str:
    """Who resolved, from the CLI or a Python program: the OS user running it."""
    try:
        return f"user:{getpass.getuser()}"
    except OSError:  # no name for this uid (a container's): the uid is still who
        return f"user:uid {os.getuid()}"


def resolution(
    attempt_id: str,
    outcome: str,
    result: Any,
    note: str,
    by: str,
    output_problems: Callable[[Any], Sequence[str]] | None = None,
) -> Resolution:
    """The resolution, or ResolutionInvalid naming the field: an outcome that is not one of
    OUTCOMES; `succeeded` without a result (the result is what the job then holds), or with
    one the task's contract refuses (`output_problems`, as any provider's answer is checked,
    after the configured keys are scrubbed from it: an owner never reads one).
    An empty note is recorded as "resolved OUTCOME by an operator"."""
    if outcome not in OUTCOMES:
        raise ResolutionInvalid(
            attempt_id=attempt_id,
            field="outcome",
            reason=f"{outcome!r} is not one of {', '.join(OUTCOMES)}",
        )
    if outcome == "succeeded":
        # as a provider's answer is (router/attempt_call.py): the result is judged as stored
        result = scrub_output(result)
        if result is None:
            raise ResolutionInvalid(
                attempt_id=attempt_id,
                field="result",
                reason="result is required with succeeded: the output the provider made, "
                "which the job then holds",
            )
        problems = list(output_problems(result)) if output_problems else []
        if problems:
            raise ResolutionInvalid(
                attempt_id=attempt_id,
                field="result",
                reason="the result breaks the task's contract: " + "; ".join(problems[:3]),
            )
    note = note.strip() or f"resolved {outcome} by an operator"
    return Resolution(attempt_id, AttemptState(outcome), result, note, by or by_os_user())


__all__ = ["OUTCOMES", "Outcome", "Resolution", "by_os_user", "by_token", "resolution"]
