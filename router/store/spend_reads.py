"""The spend report's read (jobrouter.spend_report says what the report is): the attempts
started in a time range, summed per owner, task, provider and UTC day, in one statement
(`spend_by_day` in queries.sql, its day floored in queries_postgres.sql, over the
index of migration 0022). A part of the store.

The statement always groups by all four: a report by fewer keys (or by month) adds these rows
up in Python, so one statement text serves every grouping, and the rows it returns are bounded
by owners x tasks x providers x days, never by attempts.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobrouter.store.connector import Connector

DAY_S = 86_400


@dataclass(frozen=True)
class SpendRow:
    """One owner's task on one provider on one UTC day: its attempts, their tokens (prompt +
    completion, as reported), the sum of their known costs (None: no cost known) and how many
    have an unknown cost (never counted as 0 in `cost_usd`)."""

    owner: str
    task: str
    provider: str
    day: float  # the UTC day's 00:00, epoch seconds
    attempts: int
    tokens: int
    cost_usd: float | None
    cost_unknown: int


class SpendReads:
    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._q = connector.queries

    async def spend_by_day(
        self, since: float, until: float, owner: str | None = None
    ) -> list[SpendRow]:
        """The attempts started at `since` <= t < `until` (epoch seconds), summed per owner,
        task, provider and UTC day; only `owner`'s jobs when given."""
        params = {"since": since, "until": until, "owner": owner}
        # a range may hold many attempts: the walk must not hold up the event loop
        rows = await self.connector.fetchall_aside(self._q["spend_by_day"], params)
        return [
            SpendRow(
                owner=row["owner"],
                task=row["task"],
                provider=row["provider"],
                day=float(int(row["day"]) * DAY_S),
                attempts=int(row["attempts"]),
                tokens=int(row["tokens"] or 0),
                cost_usd=None if row["cost_usd"] is None else float(row["cost_usd"]),
                cost_unknown=int(row["cost_unknown"] or 0),
            )
            for row in rows
        ]
