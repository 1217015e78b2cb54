"""Change notification: wake whoever waits on a job when a change of it commits.

In-process changes notify directly (with the job as committed, when the writer has it); other
processes' events arrive without the job through the connector's `ChangeFeed` where it has one
and the process follows them (PostgreSQL LISTEN/NOTIFY, for `Router.watch`); else watchers
find them by polling (`Router.wait` through router/store/waits.py, which brings the job).
`Changes` is the job store's collaborator for it: every part that commits a change of a job
tells it (`notify`).

Each watcher has its own `Change` for as long as it watches, so no change between two waits
is missed, and it reads the job again only when a change came without the job (another
process made it): on PostgreSQL every read is a transaction on the server.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from jobrouter.models import Job

# Jobs created here, as committed, until a change of them is heard: `Router.wait` right after
# `submit` needs no read. Bounded: a job evicted is simply read.
CREATED_KEPT = 4096


@dataclass
class Change:
    """One watcher's view of a job's changes: `wait()` for the next one. `job` is the newest
    job as a change in this process committed it; `stale` says a change came without the job
    (another process made it, or changes may have been missed): read it again."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    job: Job | None = None
    stale: bool = False

    async def wait(self) -> bool:
        return await self.event.wait()

    def take(self) -> Job | None:
        """The job as the changes since the last `take` left it, or None when it must be read;
        re-arms the watcher."""
        job = None if self.stale else self.job
        self.event.clear()
        self.job, self.stale = None, False
        return job

    def saw(self, job: Job | None) -> None:
        if job is None:
            self.stale = True
        elif self.job is None or job.version >= self.job.version:
            self.job = job
        self.event.set()


class Changes:
    """The watchers of this process's jobs, and the jobs created here as committed."""

    def __init__(self) -> None:
        self._changed: dict[str, list[Change]] = {}
        self._created: OrderedDict[str, Job] = OrderedDict()

    @contextmanager
    def watching(self, job_id: str) -> Iterator[Change]:
        """The job's changes from now on. Enter it BEFORE reading the job, then wait on it
        (and `take()` after each wake-up): no change after the entry can be missed."""
        change = Change()
        self._changed.setdefault(job_id, []).append(change)
        try:
            yield change
        finally:
            watchers = self._changed.get(job_id)
            if watchers is not None:
                watchers.remove(change)
                if not watchers:
                    del self._changed[job_id]

    def created_here(self, job_id: str) -> Job | None:
        """The job as this process created it, if no change of it has been heard since: with
        `watching` entered first, as good as a read."""
        return self._created.get(job_id)

    def remember_created(self, job: Job) -> None:
        """Called inside the creating transaction, before its COMMIT: a change of the job can
        only come after, so none can be missed. Forgotten again if the transaction fails."""
        self._created[job.id] = job
        while len(self._created) > CREATED_KEPT:
            self._created.popitem(last=False)

    def forget_created(self, job_id: str) -> None:
        self._created.pop(job_id, None)

    def notify(self, job_id: str, job: Job | None = None) -> None:
        """Wake the job's watchers; `job` is the job as just committed, when the caller has it
        (a watcher then needs no read). `job_id` "" means changes may have been missed (the
        change feed was down): every watcher reads again."""
        if not job_id:
            self._created.clear()
            for watchers in self._changed.values():
                for change in watchers:
                    change.saw(None)
            return
        if job is None or job.version > getattr(self._created.get(job_id), "version", 0):
            self._created.pop(job_id, None)
        for change in self._changed.get(job_id, ()):
            change.saw(job)
