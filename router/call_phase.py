"""An attempt call's phase as data (beside router/states.py, whose job and attempt tables it
follows): where one attempt's provider call is, in this process, from its row written to its
end recorded. Each phase declares the flags the driver's decisions read (router/driver.py:
what a stop cancels, what it records `not called`; router/worker.py: which calls outlive
their task, so are never adopted), and one table lists every allowed move:

    written ──► calling ──► answered ──► recorded
       │           └──────────────────────► recorded   (cancelled in flight: unknown/cancelled)
       ├──► unbuilt ──► recorded
       │       └──────► not_called                     (its record failed; nothing was sent)
       └──► not_called                                 (stopped before its task ran)

A phase is never stored: the attempt's row (router/states.py `AttemptState`) is the durable
truth; the phase is what this process knows of a call it holds.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import StrEnum

from jobrouter.errors import InvalidTransition
from jobrouter.models import Attempt


class CallPhase(StrEnum):
    WRITTEN = "written"  # the attempt's row is committed, its task launched, nothing sent
    CALLING = "calling"  # the provider call began: the request may be out
    UNBUILT = "unbuilt"  # its request could not be built (nothing sent); its end being recorded
    ANSWERED = "answered"  # the provider call is over; its outcome is being recorded
    RECORDED = "recorded"  # its end is on the attempt's row
    NOT_CALLED = "not_called"  # stopped before its provider was called; recorded so

    @property
    def terminal(self) -> bool:
        """Its end is on the attempt's row: nothing is left to stop, record or remember."""
        return self in _TERMINAL

    @property
    def recording(self) -> bool:
        """Its outcome is known and being written: a stop never cancels it, the record would
        be lost and the attempt left `started`, later a false `unknown` (I7)."""
        return self in _RECORDING

    @property
    def request_out(self) -> bool:
        """The request may have reached the provider and no end is recorded: the call is never
        made again (I3), so this process remembers it after its task ends."""
        return self in _REQUEST_OUT

    @property
    def stoppable(self) -> bool:
        """What a driver letting go of its job cancels: a call not yet called, or in flight."""
        return not self.terminal and not self.recording

    @property
    def unsent(self) -> bool:
        """No request went out and no end is recorded: a stopped driver records it `not
        called` (nothing was sent), rather than leaving it `started` for its lease to expire."""
        return not self.terminal and not self.request_out


_TERMINAL = frozenset({CallPhase.RECORDED, CallPhase.NOT_CALLED})
_RECORDING = frozenset({CallPhase.UNBUILT, CallPhase.ANSWERED})
_REQUEST_OUT = frozenset({CallPhase.CALLING, CallPhase.ANSWERED})

CALL_TRANSITIONS: dict[CallPhase, frozenset[CallPhase]] = {
    CallPhase.WRITTEN: frozenset({CallPhase.CALLING, CallPhase.UNBUILT, CallPhase.NOT_CALLED}),
    # A call cancelled in flight records its end at once (unknown, or cancelled with the
    # driver's reason): nothing answered it.
    CallPhase.CALLING: frozenset({CallPhase.ANSWERED, CallPhase.RECORDED}),
    # An unbuilt call whose record failed is recorded `not called` by its stopping driver.
    CallPhase.UNBUILT: frozenset({CallPhase.RECORDED, CallPhase.NOT_CALLED}),
    CallPhase.ANSWERED: frozenset({CallPhase.RECORDED}),
    CallPhase.RECORDED: frozenset(),
    CallPhase.NOT_CALLED: frozenset(),
}

# What each phase means, for the error of a move its table refuses (as httpx's ClientState
# says why a client cannot send once closed).
_MEANS: dict[CallPhase, str] = {
    CallPhase.WRITTEN: "its provider was not called yet",
    CallPhase.CALLING: "its request may be out and nothing has answered",
    CallPhase.UNBUILT: "its request could not be built and that end is being recorded",
    CallPhase.ANSWERED: "its provider answered and that outcome is being recorded",
    CallPhase.RECORDED: "its end is already recorded",
    CallPhase.NOT_CALLED: "it was already recorded as never called",
}


def call_can_move(src: CallPhase, dst: CallPhase) -> bool:
    return dst in CALL_TRANSITIONS[src]


def refused_move(attempt_id: str, src: CallPhase, dst: CallPhase) -> InvalidTransition:
    """The error of a move the table refuses: what `src` means and where it may go instead."""
    allowed = sorted(CALL_TRANSITIONS[src])
    then = f"it may only become {' or '.join(allowed)}" if allowed else "nothing follows"
    return InvalidTransition(
        entity="attempt call", entity_id=attempt_id, src=src, dst=dst, why=f"{_MEANS[src]}; {then}"
    )


@dataclass
class CallRecord:
    """One attempt call as its driver, the call itself and this process's worker see it: its
    attempt, its phase, its task, why its driver cancelled it (`cancel_reason`; None when the
    router stopped: the outcome is then unknown, I3), and its row as its end was recorded."""

    attempt: Attempt
    phase: CallPhase = CallPhase.WRITTEN
    cancel_reason: str | None = None
    ended: Attempt | None = None
    task: asyncio.Task[None] = field(init=False)  # set by its driver as it launches the call

    @property
    def attempt_id(self) -> str:
        return self.attempt.id

    def move(self, dst: CallPhase) -> None:
        if not call_can_move(self.phase, dst):
            raise refused_move(self.attempt.id, self.phase, dst)
        self.phase = dst

    def end(self, row: Attempt, dst: CallPhase = CallPhase.RECORDED) -> None:
        """Its end is on the row: `recorded`, or `not_called` for a call stopped before it."""
        self.move(dst)
        self.ended = row
