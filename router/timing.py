"""How long a job and each of its attempts may take.

A job's deadline is one value (`Deadline`), taken from the stored job, or from its task for a
job about to be created; an attempt's timeout and lease derive from it here and nowhere else.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from jobrouter.models import Job
from jobrouter.tasks import TaskRuntime


@dataclass(frozen=True)
class Deadline:
    """When a job must be over, in epoch seconds; `at` None: it has no deadline."""

    at: float | None

    @classmethod
    def of(cls, job: Job) -> Deadline:
        return cls(job.deadline_at.timestamp() if job.deadline_at else None)

    @classmethod
    def new(cls, task: TaskRuntime, now: float) -> Deadline:
        """The deadline of a job of `task` created at `now` (as the store computes it)."""
        return cls(now + task.deadline_s if task.deadline_s else None)

    def left(self, now: float) -> float | None:
        return None if self.at is None else max(0.0, self.at - now)


@dataclass(frozen=True)
class AttemptLimits:
    """The attempt timeout of each provider ([providers.*] timeout.read) and the grace an
    attempt's lease adds to its timeout before the attempt counts as abandoned."""

    provider_timeouts: Mapping[str, float]
    lease_grace_s: float

    def timeout_s(self, task: TaskRuntime, provider: str, deadline: Deadline) -> float | None:
        """How long an attempt of `task` on `provider` may take, the job's deadline included."""
        limits = [
            task.attempt_timeout_s,
            self.provider_timeouts.get(provider),
            deadline.left(time.time()),
        ]
        present = [limit for limit in limits if limit is not None]
        return min(present) if present else None

    def lease_s(self, task: TaskRuntime, provider: str, deadline: Deadline) -> float:
        return (self.timeout_s(task, provider, deadline) or 0.0) + self.lease_grace_s
