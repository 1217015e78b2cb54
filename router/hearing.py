"""Whether a worker waits on the server, hears wake-ups ("a job is free"), or claims by
polling, as data.

On PostgreSQL a wake-up through LISTEN/NOTIFY is a notification, and the server wakes EVERY
listening backend of the database for each notifying transaction; each reads it in a
transaction of its own. Where claims can wait on the server (PostgreSQL, migration 0012,
router/store/server_waits.py) a worker does not listen at all: its quiet mode is `await`, in
which the claim itself waits on the server up to `poll_s` for a job and locks it (another
waiting worker passes over it), so the wake-up and the claim are one transaction and no race
is lost:

| mode | hears wake-ups | claims | next, after a claim that took n jobs |
|---|---|---|---|
| await | no | at once, waiting on the server up to `poll_s` | n >= 2: busy |
| busy | no | every BUSY_POLL_S | n = 0: await |

A busy worker takes in one claim what many wake-ups (or waiting claims, one per job) would
have announced. Where claims cannot wait on the server, the quiet mode is `listen` (a
connector without a change feed, SQLite, hears nothing and so claims every `poll_s`); with a
change feed, a worker listens only while a wake-up is worth it:

| mode | hears wake-ups | claims | next, after a claim that took n jobs (-1: no free slot) |
|---|---|---|---|
| listen | yes | when woken; every `poll_s` | n >= 2: busy; n = 0 after a wake-up: backoff |
| busy | no | every BUSY_POLL_S | n = 0: listen, and claim once more (what came before) |
| backoff | no | every `poll_s` | n >= 2: busy; n = 1: listen |

(n = 0 after a wake-up: another worker took the job.) A worker that loses a race to another
leaves the hearing to that one, and its own poll still finds what nobody takes (the same
`poll_s` that finds other processes' jobs without a change feed).
"""

from __future__ import annotations

from enum import Enum

BUSY_AFTER = 2  # a claim that takes this many jobs: they come faster than wake-ups help
BUSY_POLL_S = 0.05


class Hearing(Enum):
    LISTEN = "listen"
    BUSY = "busy"
    BACKOFF = "backoff"
    AWAIT = "await"

    @property
    def paused(self) -> bool:
        """Whether wake-ups are not heard in this mode."""
        return self is not Hearing.LISTEN

    def timeout(self, poll_s: float, rest: bool = False) -> float:
        """How long to wait for a wake-up before claiming anyway; `rest`: the last claim could
        not run (no free slot, or it failed), so an `await` worker does not claim at once."""
        if self is Hearing.BUSY:
            return min(BUSY_POLL_S, poll_s)
        return 0.0 if self is Hearing.AWAIT and not rest else poll_s

    def after(self, claimed: int, woken: bool, quiet: Hearing | None = None) -> Hearing:
        """The mode after a claim that took `claimed` jobs (-1: no free slot, nothing tried);
        `woken`: the claim followed a wake-up heard from another process; `quiet`: the mode
        of a worker with little to do (LISTEN, or AWAIT where claims wait on the server)."""
        quiet = quiet or Hearing.LISTEN
        if self in (Hearing.LISTEN, Hearing.AWAIT):
            if claimed >= BUSY_AFTER:
                return Hearing.BUSY
            return Hearing.BACKOFF if claimed == 0 and woken else self
        if self is Hearing.BUSY:
            return quiet if claimed == 0 else self
        if claimed >= BUSY_AFTER:
            return Hearing.BUSY
        return quiet if claimed == 1 else self
