"""A fault-injecting `Connector`: wraps a real one (SQLite or PostgreSQL) and fails chosen write
transactions the way a database connection fails.

A fault is planned on a named query (`finish_job_cas`, `insert_job`, ...): the next write
transaction that runs it fails, either

- `before` COMMIT: the transaction is rolled back, nothing was written, `StoreError` raised; or
- `after` COMMIT: the transaction IS committed, then `StoreError` is raised as if the
  acknowledgement had been lost on the way back; its after-commit callbacks do not run (the
  caller never learns of the commit, as with a real lost acknowledgement).

`times` faults of a plan are used one per matching transaction (None: every one). Reads pass
through. `injected` counts the faults used, per query name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from jobrouter.errors import StoreError
from jobrouter.store.connector import Connector, ConnectorStats, Params, Row, Tx

When = Literal["before", "after"]


@dataclass
class Fault:
    query: str
    when: When
    times: int | None = 1


class _SpyTx:
    def __init__(self, inner: Tx, names: Mapping[str, str]) -> None:
        self._inner = inner
        self._names = names
        self.ran: set[str] = set()
        self.callbacks: list[Callable[[], None]] = []

    def after_commit(self, callback: Callable[[], None]) -> None:
        self.callbacks.append(callback)

    def _saw(self, query: str) -> None:
        name = self._names.get(query)
        if name is not None:
            self.ran.add(name)

    async def execute(self, query: str, params: Params) -> int:
        self._saw(query)
        return await self._inner.execute(query, params)

    async def fetchone(self, query: str, params: Params) -> Row | None:
        self._saw(query)
        return await self._inner.fetchone(query, params)

    async def fetchall(self, query: str, params: Params) -> list[Row]:
        self._saw(query)
        return await self._inner.fetchall(query, params)


class FaultyConnector:
    def __init__(self, inner: Connector) -> None:
        self.inner = inner
        self.url = inner.url
        self.dialect = inner.dialect
        self.queries: Mapping[str, str] = inner.queries
        self.stats: ConnectorStats = inner.stats
        self.plan: list[Fault] = []
        self.injected: Counter[str] = Counter()
        self._names = {text: name for name, text in inner.queries.items()}

    def fail(self, query: str, when: When, times: int | None = 1) -> None:
        if query not in self.queries:
            raise ValueError(f"no query named {query!r}")
        self.plan.append(Fault(query, when, times))

    def _take(self, ran: set[str], when: When) -> Fault | None:
        for fault in self.plan:
            if fault.when == when and fault.query in ran and fault.times != 0:
                if fault.times is not None:
                    fault.times -= 1
                self.injected[fault.query] += 1
                return fault
        return None

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Tx]:
        async with self.inner.write() as tx:
            spy = _SpyTx(tx, self._names)
            yield spy
            fault = self._take(spy.ran, "before")
            if fault is not None:
                raise StoreError(f"injected: connection lost before COMMIT ({fault.query})")
        fault = self._take(spy.ran, "after")
        if fault is not None:
            raise StoreError(
                f"injected: COMMIT acknowledgement lost ({fault.query}); the "
                "transaction may or may not have committed"
            )
        for callback in spy.callbacks:
            callback()

    async def fetchone(self, query: str, params: Params) -> Row | None:
        return await self.inner.fetchone(query, params)

    async def fetchall(self, query: str, params: Params) -> list[Row]:
        return await self.inner.fetchall(query, params)

    async def fetchall_aside(self, query: str, params: Params) -> list[Row]:
        return await self.inner.fetchall_aside(query, params)

    async def close(self) -> None:
        await self.inner.close()

    # The optional parts of the seam (ChangeFeed, LoadAware) are the wrapped connector's own.
    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "jobs_in_flight":
            setattr(self.inner, name, value)
        else:
            super().__setattr__(name, value)
