"""This process's worker as a job's driver and its attempt calls see it (router/driver.py,
router/attempt_call.py): its id, its attempt limits, the attempts it has in hand, and where
each ended attempt is counted. The engine (router/engine.py) makes one per process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jobrouter.models import Attempt
from jobrouter.timing import AttemptLimits

# an ended attempt (its row as written), its job's task, and whether it timed out
MetricFn = Callable[[Attempt, str, bool], None]


@dataclass
class InHand:
    """Attempts of this worker with a task here (`tasks`), and those whose provider call began
    and whose outcome is not recorded yet (`calls_begun`): a `started` attempt of this worker
    in neither was never called (its driver failed first, or its COMMIT acknowledgement was
    lost), so calling it now is safe (the driver adopts it) where waiting would end it
    `unknown`. Shared by every driver of the process."""

    tasks: set[str] = field(default_factory=set)
    calls_begun: set[str] = field(default_factory=set)

    def never_called(self, attempt_id: str) -> bool:
        return attempt_id not in self.tasks and attempt_id not in self.calls_begun


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
