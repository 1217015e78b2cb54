"""The eligibility gate: which providers may get a new attempt for a task, and why not.

A provider is eligible when it is configured, holds a valid certification for the task's
contract (matching fingerprints, not expired, passed) when certification is required, and its
circuit lets calls through. The reasons go on the job's event log.
"""

from __future__ import annotations

from collections.abc import Mapping

from providers import ErrorKind, Provider
from router.policy import Eligibility
from router.store.sql import SqlStore
from router.tasks import TaskRuntime

CERTIFICATION_CACHE_S = 2.0


class Gate:
    def __init__(
        self, store: SqlStore, providers: Mapping[str, Provider], *, required: bool
    ) -> None:
        self.store = store
        self.providers = providers
        self.required = required

    async def eligibility(self, task: TaskRuntime) -> dict[str, Eligibility]:
        verdicts: dict[str, Eligibility] = {}
        for name in task.policy.providers:
            if name not in self.providers:
                verdicts[name] = Eligibility(False, "not configured in [providers]")
            else:
                verdicts[name] = Eligibility(True)
        return verdicts

    async def record(self, provider: str, kind: ErrorKind | None) -> None:
        """An attempt's outcome, for the provider's circuit (see router.breaker)."""
        return None
