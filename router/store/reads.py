"""Reads of jobs, attempts and events (no transaction: each is one statement): a part of the
job store (jobstore.py)."""

from __future__ import annotations

from jobrouter.models import Attempt, Job, JobEvent
from jobrouter.store.connector import Connector
from jobrouter.store.rows import attempt_from_row, event_from_row, job_from_row


class JobReads:
    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._q = connector.queries

    async def get_job(self, job_id: str) -> Job | None:
        row = await self.connector.fetchone(self._q["get_job"], {"id": job_id})
        return job_from_row(row) if row else None

    async def find_job(self, owner: str, idempotency_key: str) -> Job | None:
        params = {"owner": owner, "idempotency_key": idempotency_key}
        row = await self.connector.fetchone(self._q["find_job"], params)
        return job_from_row(row) if row else None

    async def get_attempt(self, attempt_id: str) -> Attempt | None:
        row = await self.connector.fetchone(self._q["get_attempt"], {"id": attempt_id})
        return attempt_from_row(row) if row else None

    async def list_attempts(self, job_id: str) -> list[Attempt]:
        rows = await self.connector.fetchall(self._q["list_attempts"], {"job_id": job_id})
        return [attempt_from_row(row) for row in rows]

    async def list_events(self, job_id: str, after: int = 0) -> list[JobEvent]:
        params = {"job_id": job_id, "after": after}
        rows = await self.connector.fetchall(self._q["list_events"], params)
        return [event_from_row(row) for row in rows]
