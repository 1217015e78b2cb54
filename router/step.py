"""A job's next step: read which providers are eligible, then ask the policy.

One function for every decision: the first attempt of a job about to be created or claimed
(router/engine.py) and each turn of its driver's loop (router/driver.py). The policy itself is
pure (router/policy.py); the read is the provider-health port's (router/health.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from jobrouter.health import ProviderHealth
from jobrouter.models import Attempt, NewEvent
from jobrouter.policy import Decision, Eligibility, Start, decide
from jobrouter.states import EventKind
from jobrouter.tasks import TaskRuntime
from jobrouter.timing import Deadline


@dataclass(frozen=True)
class Step:
    decision: Decision
    eligibility: Mapping[str, Eligibility]

    def refusals(self) -> list[NewEvent]:
        """Providers refused for this decision, as events: the reasons go on the job's log."""
        return [
            NewEvent(
                kind=EventKind.PROVIDER_SKIPPED, data={"provider": name, "reason": verdict.reason}
            )
            for name, verdict in self.eligibility.items()
            if not verdict.ok
        ]

    def start_at_once(self) -> str | None:
        """The provider to start on when that needs no probe: a half-open circuit's probe (a
        verdict with a reason) is claimed in a transaction of its own, by the driver."""
        decision = self.decision
        if not isinstance(decision, Start) or self.eligibility[decision.provider].reason:
            return None
        return decision.provider


def decide_step(
    task: TaskRuntime,
    attempts: Sequence[Attempt],
    eligibility: Mapping[str, Eligibility],
    deadline: Deadline,
) -> Step:
    """The step, from an eligibility read before (inside a transaction: no I/O)."""
    decision = decide(task.policy, attempts, eligibility, now=time.time(), deadline_at=deadline.at)
    return Step(decision, eligibility)


async def next_step(
    health: ProviderHealth,
    task: TaskRuntime,
    attempts: Sequence[Attempt],
    deadline: Deadline,
    held_back: Mapping[str, Eligibility] | None = None,
) -> Step:
    """`held_back`: providers the job's own starts were refused on (a budget: see
    jobrouter.spending), each until its `retry_at` (None: for good); they count only where the
    health read would let the provider be tried."""
    eligibility = await health.eligibility(task)
    if held_back:
        eligibility = _holding_back(eligibility, held_back, time.time())
    return decide_step(task, attempts, eligibility, deadline)


def _holding_back(
    eligibility: Mapping[str, Eligibility], held_back: Mapping[str, Eligibility], now: float
) -> dict[str, Eligibility]:
    merged = dict(eligibility)
    for name, verdict in held_back.items():
        current = merged.get(name)
        if current is not None and current.ok and (verdict.retry_at or math.inf) > now:
            merged[name] = verdict
    return merged
