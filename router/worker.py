"""This process's worker as a job's driver and its attempt calls see it (router/driver.py,
router/attempt_call.py): its id, its attempt limits, the attempts it has in hand, and where
each ended attempt is counted. The engine (router/engine.py) makes one per process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jobrouter.call_phase import CallRecord
from jobrouter.models import Attempt
from jobrouter.timing import AttemptLimits

# an ended attempt (its row as written), its job's task, and whether it timed out
MetricFn = Callable[[Attempt, str, bool], None]


@dataclass
class InHand:
    """This worker's attempt calls, one `CallRecord` each by attempt id (router/call_phase.py),
    shared by every driver of the process. A call is held from its launch until its task ends,
    and after that only while its phase says its request may be out with no end recorded
    (`CallPhase.request_out`: calling it again could do the work twice, I3). So a `started`
    attempt of this worker held by nothing here was never called (its driver failed first, or
    its COMMIT acknowledgement was lost): calling it now is safe (the driver adopts it) where
    waiting would end it `unknown`."""

    calls: dict[str, CallRecord] = field(default_factory=dict)

    def hold(self, record: CallRecord) -> None:
        self.calls[record.attempt_id] = record

    def let_go(self, record: CallRecord) -> None:
        """Its task is over (or was cancelled before it ran): forget it unless its request may
        be out with no end recorded."""
        if self.calls.get(record.attempt_id) is record and not record.phase.request_out:
            del self.calls[record.attempt_id]

    def never_called(self, attempt_id: str) -> bool:
        return attempt_id not in self.calls


@dataclass(frozen=True)
class Worker:
    """This process's worker as a job's driver sees it: its id (on the attempts it writes and
    the claims it releases), its attempt limits, how long a parked job waits when no recovery
    time is known, the attempts it has in hand, and where each ended attempt is counted."""

    id: str
    limits: AttemptLimits
    poll_s: float
    in_hand: InHand
    metric: MetricFn
