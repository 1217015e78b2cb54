"""The outbox as seen by a bus relay and its consumers: `BusOutbox` (`SqlStore.outbox.bus`).

With `[delivery] nats_url` set, a relay claims events not yet published, publishes each to the
JetStream stream and marks it `published_at` after the acknowledgement; webhook senders consume
the stream and record the outcome here (delivered, a failed try, a dead letter), in the same
columns and tables the database outbox uses, so `jobrouter outbox`, the retention and the
metrics read one truth. Its SQL is in bus.sql (kept apart from queries.sql: a separate feature),
PostgreSQL's own spellings in bus_postgres.sql; the connector loads them as it loads queries.sql
and queries_postgres.sql, into the one `connector.queries`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

from jobrouter.store.connector import Connector
from jobrouter.store.outbox_rows import OutboxEvent, claim_params, event_from_row


class BusOutbox:
    """The bus relay's part of the outbox store (router/bus_nats.py)."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._q = connector.queries

    async def claim_unpublished(
        self, owners: Iterable[str], worker: str, *, claim_s: float, limit: int
    ) -> list[OutboxEvent]:
        """Events of `owners` not on the bus yet, claimed by `worker` for `claim_s`."""
        params = claim_params(owners, worker, claim_s=claim_s, limit=limit)
        if params is None:
            return []
        async with self.connector.write() as tx:
            rows = await tx.fetchall(self._q["claim_unpublished"], params)
        return sorted((event_from_row(row) for row in rows), key=lambda e: (e.created_at, e.id))

    async def outbox_published(self, event_ids: Iterable[str]) -> int:
        """The stream acknowledged these events: they are on the bus, in one transaction.
        Returns how many were not marked yet."""
        ids = json.dumps(sorted(set(event_ids)))
        async with self.connector.write() as tx:
            return await tx.execute(self._q["outbox_published"], {"ids": ids, "now": time.time()})

    async def outbox_unclaim(self, event_id: str, worker: str) -> None:
        """A publish failed: hand the event back, to be published again at the next round."""
        async with self.connector.write() as tx:
            await tx.execute(self._q["outbox_unclaim"], {"id": event_id, "worker": worker})

    async def outbox_bus_try(self, event_id: str, *, tries: int, error: str) -> None:
        """A webhook try of a bus message failed; the stream redelivers it later."""
        async with self.connector.write() as tx:
            await tx.execute(
                self._q["outbox_bus_try"], {"id": event_id, "tries": tries, "error": error}
            )

    async def outbox_bury_published(self, event_id: str, *, tries: int, error: str) -> bool:
        """The last allowed try of a bus message failed: the event becomes a dead letter, in
        one transaction. False when it is delivered or already gone."""
        async with self.connector.write() as tx:
            row = await tx.fetchone(self._q["take_undelivered_outbox"], {"id": event_id})
            if row is None:
                return False
            dead = {
                key: row[key] for key in ("id", "job_id", "owner", "kind", "payload", "created_at")
            }
            dead.update(tries=tries, last_error=error, now=time.time())
            await tx.execute(self._q["insert_dead"], dead)
        return True

    async def reclaim_outbox(self) -> int:
        """Free the expired claims of processes that died mid-delivery; how many."""
        async with self.connector.write() as tx:
            return await tx.execute(self._q["reclaim_outbox"], {"now": time.time()})
