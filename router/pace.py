"""How often a worker claims, as data: nothing from another process wakes it.

On PostgreSQL claims wait on the server (migration 0012, router/store/server_waits.py), so a
quiet worker's mode is `await`: its claim itself waits on the server up to `poll_s` for a job
and locks it (another waiting worker passes over it), so the wake-up and the claim are one
transaction and no race is lost. On SQLite (a connector whose claims cannot wait on the server)
the quiet mode is `poll`: a claim every `poll_s`. Either way a job created in this process
goes straight to a worker here, and `Engine.wake` (a job reopened, leases expired) claims at
once, but other processes' jobs are found only by these claims:

| mode | claims | next, after a claim that took n jobs (-1: no free slot) |
|---|---|---|
| await | at once, waiting on the server up to `poll_s` | n >= 2: busy |
| poll | every `poll_s`, or when woken in this process | n >= 2: busy |
| busy | every BUSY_POLL_S | n = 0: the quiet mode |

A busy worker takes in one claim what many waiting claims (one per job) would have taken.
"""

from __future__ import annotations

from enum import Enum

BUSY_AFTER = 2  # a claim that takes this many jobs: they come faster than one claim per job
BUSY_POLL_S = 0.05


class Pace(Enum):
    AWAIT = "await"
    POLL = "poll"
    BUSY = "busy"

    def timeout(self, poll_s: float, rest: bool = False) -> float:
        """How long to wait for a wake-up from this process before claiming anyway; `rest`:
        the last claim could not run (no free slot, or it failed), so an `await` worker does
        not claim at once."""
        if self is Pace.BUSY:
            return min(BUSY_POLL_S, poll_s)
        return 0.0 if self is Pace.AWAIT and not rest else poll_s

    def after(self, claimed: int, quiet: Pace) -> Pace:
        """The mode after a claim that took `claimed` jobs (-1: no free slot, nothing tried);
        `quiet`: the mode of a worker with little to do (AWAIT where claims wait on the
        server, else POLL)."""
        if self is Pace.BUSY:
            return quiet if claimed == 0 else self
        return Pace.BUSY if claimed >= BUSY_AFTER else self
