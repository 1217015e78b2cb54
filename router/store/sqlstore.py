"""`SqlStore`: the one job store, assembled from its consumers' parts over one `Connector`.

Each part is a file named for what it holds, all over the same connector (`self.connector`,
its loaded queries `self._q`): jobs.py (submit, job outcomes), attempts.py (start, finish,
resolve), transitions.py (the steps inside a write transaction those share), claims.py (claims
and leases), reads.py and listing.py (reads), changes.py (waking watchers), outbox.py and bus.py
(completion events), waits.py (one read for all open waits), circuits.py, certifications.py,
tokens.py, health.py.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from typing import Literal

from router.models import Job
from router.store.attempts import AttemptMethods
from router.store.bus import BusOutbox
from router.store.certifications import CertificationStore
from router.store.changes import Change, ChangeMethods
from router.store.circuits import CircuitStore
from router.store.claims import ClaimMethods
from router.store.connector import ChangeFeed, Connector, LoadAware
from router.store.health import HealthMethods
from router.store.jobs import JobMethods
from router.store.listing import ListingMethods
from router.store.outbox import OutboxStore, OutboxWritten
from router.store.reads import ReadMethods
from router.store.tokens import TokenStore
from router.store.waits import Cadence, Wait, WaitMethods


class SqlStore(
    JobMethods,
    AttemptMethods,
    ReadMethods,
    ChangeMethods,
    ClaimMethods,
    HealthMethods,
    ListingMethods,
    WaitMethods,
):
    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self.url = connector.url
        self._q = connector.queries
        self.circuits = CircuitStore(connector)
        self.certifications = CertificationStore(connector)
        self.tokens = TokenStore(connector)
        self._changed: dict[str, list[Change]] = {}  # see ChangeMethods
        self._created: OrderedDict[str, Job] = OrderedDict()
        self._outbox_written = OutboxWritten()
        self.outbox = OutboxStore(connector, self._outbox_written, BusOutbox(connector))
        self._waits: dict[int, Wait] = {}  # see WaitMethods
        self._cadence = Cadence()
        self._waits_kick: asyncio.Event | None = None
        self._waits_task: asyncio.Task[None] | None = None
        self._wait_calls = self._wait_calls_for(connector)  # reads that wait on the server
        if isinstance(connector, ChangeFeed):
            connector.on_change(self._heard)

    async def close(self) -> None:
        await self._stop_waits()
        await self.connector.close()

    def track_load(self, jobs_in_flight: Callable[[], int]) -> None:
        """Tell the connector how many jobs this process has in flight, where it cares."""
        if isinstance(self.connector, LoadAware):
            self.connector.jobs_in_flight = jobs_in_flight

    async def follow(self, what: Literal["events", "settled", "runnable"]) -> bool:
        """Hear other processes' changes of this kind from now on (a backend with a
        ChangeFeed; without one they are found by polling): "settled" for `Router.wait`,
        "events" for `Router.watch`, "runnable" for workers."""
        if isinstance(self.connector, ChangeFeed) and await self.connector.follow(what):
            if what == "settled":  # jobs created here may have settled elsewhere unheard
                self._created.clear()
            return True
        return False

    async def pause(self, what: Literal["events", "settled", "runnable"], paused: bool) -> None:
        """Stop hearing `what` for a while, or hear it again (see `ChangeFeed.pause`)."""
        if isinstance(self.connector, ChangeFeed):
            await self.connector.pause(what, paused)

    @property
    def feed_live(self) -> bool:
        """Whether other processes' changes are heard as they commit (else: poll)."""
        return isinstance(self.connector, ChangeFeed) and self.connector.feed_live

    def on_runnable(self, callback: Callable[[], None]) -> None:
        """Call `callback()` when another process submits or frees a job (a backend with a
        ChangeFeed); without one, such jobs are found by polling."""
        if isinstance(self.connector, ChangeFeed):
            self.connector.on_runnable(callback)
