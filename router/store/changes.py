"""Change notification: wake whoever waits on a job when a change of it commits.

In-process changes notify directly (with the job as committed, when the writer has it); other
processes' changes arrive through the connector's `ChangeFeed` where it has one (PostgreSQL
LISTEN/NOTIFY), else their watchers find them by polling. A mixin of `SqlStore`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from router.models import Job


@dataclass
class Change:
    """A job's next change, as `watching` hands it out: `wait()` for it; `job` is the job as
    that change committed it when the change happened in this process (else None: another
    process changed it; read it again)."""

    event: asyncio.Event
    count: int = 0
    job: Job | None = None

    async def wait(self) -> bool:
        return await self.event.wait()


class ChangeMethods:
    _changed: dict[str, Change]

    @contextmanager
    def watching(self, job_id: str) -> Iterator[Change]:
        """The job's next change. Enter it BEFORE reading the job, then wait on it: a change
        between the read and the wait cannot be missed."""
        entry = self._changed.get(job_id)
        if entry is None:
            entry = self._changed[job_id] = Change(asyncio.Event())
        entry.count += 1
        try:
            yield entry
        finally:
            entry.count -= 1
            if entry.count == 0 and self._changed.get(job_id) is entry:
                del self._changed[job_id]

    async def wait_for_change(self, job_id: str, timeout: float) -> None:  # noqa: ASYNC109
        with self.watching(job_id) as changed, contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout)

    def _notify(self, job_id: str, job: Job | None = None) -> None:
        """Wake the job's watchers; `job` is the job as just committed, when the caller has it
        (a watcher waiting for the end then needs no read)."""
        entry = self._changed.pop(job_id, None)
        if entry is not None:
            entry.job = job
            entry.event.set()
