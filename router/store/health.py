"""What `/health/ready` and `/metrics` ask the database: `HealthReads` (`SqlStore.health`)."""

from __future__ import annotations

import time

from jobrouter.store.connector import Connector, load_migrations


class HealthReads:
    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._q = connector.queries

    async def pending_migrations(self) -> list[int]:
        """Numbers of this build's migrations the database has not applied (empty: current).
        Raises when the database cannot be reached."""
        rows = await self.connector.fetchall(self._q["applied_migrations"], {})
        applied = {int(row["version"]) for row in rows}
        known = [number for number, _, _ in load_migrations(self.connector.dialect)]
        return [number for number in known if number not in applied]

    async def prove_write(self) -> None:
        """Write and commit one row: raises (a `StoreError` when the cause is the database:
        down, stalled, disk full, read-only) unless the database takes writes right now."""
        async with self.connector.write() as tx:
            await tx.execute(self._q["prove_write"], {"now": time.time()})

    async def open_job_counts(self) -> dict[str, int]:
        """Queued and running jobs, by state: the queue depth."""
        rows = await self.connector.fetchall(self._q["count_open_jobs"], {})
        counts = {"queued": 0, "running": 0}
        counts.update({str(row["state"]): int(row["n"]) for row in rows})
        return counts
