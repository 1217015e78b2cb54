"""`SqlStore`: the connector opened once, and the store of each consumer over it.

    SqlStore ── connector (connector.py; sqlite.py or postgres.py)
      ├─ jobs            JobStore (jobstore.py): jobs, attempts, claims, reads, listing, waits
      ├─ outbox          OutboxStore (outbox.py; its bus relay's part: bus.py): the deliverers,
      │                  the retention, `jobrouter outbox`
      ├─ circuits        CircuitStore (circuits.py): the breakers
      ├─ certifications  CertificationStore (certifications.py): certifier, gate, expiry warning
      ├─ live_watch      LiveWatchStore (live_watch.py): the watch of live answers, suspensions
      ├─ tokens          TokenStore (tokens.py): the HTTP API's authentication, `jobrouter token`
      ├─ spend           SpendLedger (spend.py): budgets' reservations and their settlement
      ├─ spend_reads     SpendReads (spend_reads.py): the spend report's read of attempts
      └─ health          HealthReads (health.py): `/health/ready` and `/metrics`

The stores share nothing but the connector, with one exception that is the outbox's guarantee
(I8): the job store writes a terminal change's outbox row in the change's own transaction
(`transitions.write_outbox`), and `OutboxWritten`, shared with the outbox store, tells this
process's deliverers once it commits.
"""

from __future__ import annotations

from jobrouter.store.bus import BusOutbox
from jobrouter.store.certifications import CertificationStore
from jobrouter.store.circuits import CircuitStore
from jobrouter.store.connector import Connector
from jobrouter.store.health import HealthReads
from jobrouter.store.jobstore import JobStore
from jobrouter.store.outbox import OutboxStore, OutboxWritten
from jobrouter.store.spend import SpendLedger
from jobrouter.store.spend_reads import SpendReads
from jobrouter.store.tokens import TokenStore


class SqlStore:
    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self.url = connector.url
        written = OutboxWritten()
        self.jobs = JobStore(connector, written)
        self.outbox = OutboxStore(connector, written, BusOutbox(connector))
        self.circuits = CircuitStore(connector)
        self.certifications = CertificationStore(connector)
        self.live_watch = self.certifications.live
        self.tokens = TokenStore(connector)
        self.spend = SpendLedger(connector)
        self.spend_reads = SpendReads(connector)
        self.health = HealthReads(connector)

    async def close(self) -> None:
        await self.jobs.close()
        await self.connector.close()
