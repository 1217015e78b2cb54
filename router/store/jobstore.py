"""`JobStore`: the store of jobs, their attempts, claims and events (`SqlStore.jobs`), the one
the engine, the drivers, the workers, `Router`'s reads and waits and the listing use.

It is composed of parts over the one connector, each in a file named for what it holds:
jobs.py (submit, the job's own outcomes), attempts.py (start, finish, resolve), claims.py
(claims and leases), reads.py and listing.py (reads), waits.py (one read for all open waits).
What the parts share is passed to them, never reached through each other: `Changes`
(changes.py: the watchers a commit wakes) and `OutboxWritten` (outbox.py: who hears of an outbox
row) are collaborator objects; the steps inside a write transaction (lock, move through the
transition table, start an attempt, append events, write the outbox row of a terminal change)
are functions of transitions.py taking the transaction. The parts' methods are this store's
methods: `store.jobs.get_job(...)`, `store.jobs.claiming(...)`. The jobs a commit gives this
process go to one port, the engine's (handoff.py).
"""

from __future__ import annotations

from collections.abc import Callable

from jobrouter.store.attempts import AttemptWrites
from jobrouter.store.changes import Changes
from jobrouter.store.claims import Claims
from jobrouter.store.connector import ChangeFeed, Connector, LoadAware
from jobrouter.store.handoff import Dispatch, Handoff
from jobrouter.store.jobs import JobWrites
from jobrouter.store.listing import JobListing
from jobrouter.store.outbox import OutboxWritten
from jobrouter.store.reads import JobReads
from jobrouter.store.waits import Waits


class JobStore:
    def __init__(self, connector: Connector, written: OutboxWritten) -> None:
        self.connector = connector
        self._changes = Changes()
        self._handoff = Handoff()
        self._reads = JobReads(connector)
        self._jobs = JobWrites(connector, self._changes, self._reads, written, self._handoff)
        self._attempts = AttemptWrites(connector, self._changes, written)
        self._claims = Claims(connector, self._changes, self._attempts, self._handoff)
        self._listing = JobListing(connector)
        self._waits = Waits(connector, self._changes)
        if isinstance(connector, ChangeFeed):
            connector.on_change(self._changes.notify)
        # submit and the job's outcomes (jobs.py)
        self.create_and_start = self._jobs.create_and_start
        self.settle_job = self._jobs.settle_job
        self.note = self._jobs.note
        self.cancel_job = self._jobs.cancel_job
        # attempts (attempts.py)
        self.start_attempt = self._attempts.start_attempt
        self.finish_attempt_cas = self._attempts.finish_attempt_cas
        self.finish_attempt = self._attempts.finish_attempt
        self.resolve_attempt = self._attempts.resolve_attempt
        # claims and leases (claims.py)
        self.claim = self._claims.claim
        self.claiming = self._claims.claiming
        self.claim_wait_s = self._claims.claim_wait_s
        self.release = self._claims.release
        self.renew = self._claims.renew
        self.expire_attempts = self._claims.expire_attempts
        # reads (reads.py, listing.py)
        self.get_job = self._reads.get_job
        self.find_job = self._reads.find_job
        self.get_attempt = self._reads.get_attempt
        self.list_attempts = self._reads.list_attempts
        self.list_events = self._reads.list_events
        self.list_jobs = self._listing.list_jobs
        self.count_jobs_by_state = self._listing.count_jobs_by_state
        # waiting for changes (changes.py, waits.py)
        self.watching = self._changes.watching
        self.created_here = self._changes.created_here
        self.awaiting = self._waits.awaiting

    async def close(self) -> None:
        """Stop the reader of open waits (the connector is the `SqlStore`'s to close)."""
        await self._waits.stop()

    def hand_over_to(self, port: Dispatch) -> None:
        """The engine of this process: the jobs a commit gives it (created here, claimed) go
        to `port` once committed (handoff.py). Given once, when the engine is built."""
        self._handoff.connect(port)

    def track_load(self, jobs_in_flight: Callable[[], int]) -> None:
        """Tell the connector how many jobs this process has in flight, where it cares."""
        if isinstance(self.connector, LoadAware):
            self.connector.jobs_in_flight = jobs_in_flight

    async def follow_events(self) -> None:
        """Hear other processes' events from now on, for `Router.watch` (a backend with a
        ChangeFeed; without one its poll finds them)."""
        if isinstance(self.connector, ChangeFeed):
            await self.connector.follow_events()
