"""The job listing's reads (router/listing.py says what a page is): a part of the job store.

The WHERE clause is put together from named fragments of queries.sql, one per filter in use:
a statement with `(:x IS NULL OR x = :x)` for every optional filter would be planned once for
all combinations and could use no index for any of them. Both reads go through
`fetchall_aside`: a page or a count may walk many rows, and must not hold up the event loop.
"""

from __future__ import annotations

import json
from typing import Any

from jobrouter.listing import JobFilter, JobPage, id_ceiling, id_floor
from jobrouter.states import JobState
from jobrouter.store.connector import Connector
from jobrouter.store.rows import job_from_row

# A provider filter reads the provider's job ids from its index when it has fewer attempts
# than this (a bounded read, however many jobs there are), else it walks the jobs newest first
# checking each one's attempts, which finds a page of a common provider's jobs at once. Measured
# on 10^6 jobs: a page of a provider with 10^6 attempts took 0.6 ms walking and 200 ms through
# the id list; one with none took 760 ms walking and 0.1 ms through the list.
RARE_PROVIDER_ATTEMPTS = 10_000


class JobListing:
    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._q = connector.queries

    async def list_jobs(
        self, where: JobFilter, *, limit: int, cursor: str | None = None
    ) -> JobPage:
        """One page of the jobs `where` selects, newest first, after `cursor` (the last id of
        the previous page). One row more than asked is read to know whether a page follows."""
        if where.empty:
            return JobPage(items=[], next_cursor=None)
        clause, params = self._where(where, rare_provider=await self._rare(where))
        if cursor is not None:
            clause += " " + self._q["list_jobs_cursor"]
            params["cursor"] = cursor
        sql = self._q["list_jobs"].replace("{where}", clause)
        rows = await self.connector.fetchall_aside(sql, {**params, "limit": limit + 1})
        jobs = [job_from_row(row) for row in rows[:limit]]
        more = len(rows) > limit
        return JobPage(items=jobs, next_cursor=jobs[-1].id if more and jobs else None)

    async def count_jobs_by_state(self, where: JobFilter) -> dict[JobState, int]:
        """How many jobs `where` selects in each state (every state present, zeros included)."""
        counts = dict.fromkeys(JobState, 0)
        if where.empty:
            return counts
        clause, params = self._where(where, rare_provider=await self._rare(where))
        sql = self._q["count_jobs_by_state"].replace("{where}", clause)
        for row in await self.connector.fetchall_aside(sql, params):
            counts[JobState(row["state"])] = int(row["n"])
        return counts

    async def _rare(self, where: JobFilter) -> bool:
        """Whether the filter's provider has fewer than RARE_PROVIDER_ATTEMPTS attempts."""
        if where.provider is None:
            return True
        rows = await self.connector.fetchall_aside(
            self._q["provider_attempts_upto"],
            {"provider": where.provider, "upto": RARE_PROVIDER_ATTEMPTS},
        )
        return int(rows[0]["n"]) < RARE_PROVIDER_ATTEMPTS

    def _where(self, where: JobFilter, *, rare_provider: bool = True) -> tuple[str, dict[str, Any]]:
        parts: list[str] = []
        params: dict[str, Any] = {}

        def add(fragment: str, **values: Any) -> None:
            parts.append(self._q[fragment])
            params.update(values)

        if where.owner is not None:
            add("list_jobs_owner", owner=where.owner)
        if len(where.states) == 1:
            add("list_jobs_state", state=str(where.states[0]))
        elif where.states:
            add("list_jobs_states", states=json.dumps([str(s) for s in where.states]))
        if where.task is not None:
            add("list_jobs_task", task=where.task)
        if where.idempotency_key is not None:
            add("list_jobs_key", idempotency_key=where.idempotency_key)
        if where.provider is not None:
            add(
                "list_jobs_provider" if rare_provider else "list_jobs_provider_common",
                provider=where.provider,
            )
        if where.created_after is not None:
            add(
                "list_jobs_after",
                created_after=where.created_after,
                id_floor=id_floor(where.created_after),
            )
        if where.created_before is not None:
            add(
                "list_jobs_before",
                created_before=where.created_before,
                id_ceiling=id_ceiling(where.created_before),
            )
        return " ".join(parts), params
