"""Reads that wait on the server (PostgreSQL, migrations 0012, 0013): one transaction however
long they wait.

A signal between two processes through PostgreSQL costs the receiving side a transaction: a
notification read (PostgreSQL makes every LISTENing backend read each notifying transaction in
one of its own) or a read. Polled reads pay one per look, and a look that comes too early is
followed by another. A read that waits on the server looks again every STEP_S inside one
statement and returns as soon as it finds something, or empty after its bound: one commit per
signal, a few milliseconds after it.

- `WaitCalls`: the waiting reads of settled jobs that `Router.wait` needs (router/store/waits.py
  decides which waits they cover: few open waits of jobs driven elsewhere; with many open, the
  polled reads there find several settles each and cost less).
- `await_runnable`: a worker's claiming transaction first waits for a job it may claim, and
  locks it (router/store/claims.py): the wake-up and the claim are one transaction.

A waiting read holds a pooled connection while it waits. Cancelling the task that awaits it
(a router closing, a worker stopping) cancels the statement on the server (asyncpg sends the
cancel request), so nobody stays stuck inside a wait; the bound is a second guard, kept under
the connector's statement timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, runtime_checkable

from jobrouter.store.connector import Connector, Row, Tx

log = logging.getLogger("jobrouter.store.waits")

STEP_S = 0.005  # how often a waiting read looks again on the server
SETTLE_WAIT_S = 1.0  # the longest a read of settled jobs waits before it returns empty
RETRY_S = 0.25  # after a waiting read failed, before its waits are read again


@runtime_checkable
class WaitsOnServer(Protocol):
    """Optional for a connector: a statement may wait on the server for up to
    `longest_wait_s` seconds (PostgreSQL: half its statement timeout)."""

    longest_wait_s: float


def server_wait_s(connector: Connector, wanted: float) -> float:
    """How long a read on `connector` may wait on the server, up to `wanted`; 0: it cannot."""
    if not isinstance(connector, WaitsOnServer):
        return 0.0
    return max(0.0, min(wanted, connector.longest_wait_s))


async def await_runnable(tx: Tx, queries: Mapping[str, str], wait_s: float) -> float:
    """In a claiming transaction, before the claim: wait on the server up to `wait_s` for a job
    the claim may take, locked for this transaction once found. Returns the time to claim at:
    the client's clock after the wait, or, if later, the time the wait found the job at (its
    clock at the start plus the time waited; migration 0013): a clock stepped back during the
    wait must not make the claim pass over the job the wait locked for it."""
    row = await tx.fetchone(
        queries["await_runnable"], {"now": time.time(), "wait_s": wait_s, "step_s": STEP_S}
    )
    found_at = row.get("found_at") if row else None
    now = time.time()
    return max(now, float(found_at)) if found_at is not None else now


class WaitCalls:
    """The waiting reads of settled jobs in flight, each covering some open waits (by key, as
    `Waits._waits` holds them). `cover` starts one for the waits no read in flight
    covers; each ends when one of its jobs settled (`found` gets the rows) or after its bound,
    and calls `ended` either way. `stop` cancels them all (the store is closing)."""

    def __init__(
        self,
        connector: Connector,
        queries: Mapping[str, str],
        states: str,
        found: Callable[[list[Row]], None],
        ended: Callable[[], None],
    ) -> None:
        self.wait_s = server_wait_s(connector, SETTLE_WAIT_S)
        self._connector = connector
        self._query = queries.get("await_settled", "")
        self._states = states
        self._found = found
        self._ended = ended
        self._calls: dict[asyncio.Task[None], frozenset[int]] = {}

    @property
    def usable(self) -> bool:
        return self.wait_s > 0 and bool(self._query)

    @property
    def running(self) -> bool:
        return bool(self._calls)

    def covered(self) -> set[int]:
        return {key for keys in self._calls.values() for key in keys}

    def cover(self, waits: Iterable[tuple[int, str]]) -> None:
        """Start one waiting read for these (key, job id) waits, if any."""
        chosen = dict(waits)
        if not chosen:
            return
        ids = json.dumps(sorted(set(chosen.values())))
        task = asyncio.get_running_loop().create_task(self._call(ids), name="jobrouter-wait")
        self._calls[task] = frozenset(chosen)

    async def _call(self, ids: str) -> None:
        params = {"ids": ids, "states": self._states, "wait_s": self.wait_s, "step_s": STEP_S}
        try:
            try:
                rows = await self._connector.fetchall(self._query, params)
            except Exception:  # a database away: pause (the waiters' own timeouts read too)
                log.warning("a waiting read of settled jobs failed", exc_info=True)
                await asyncio.sleep(RETRY_S)
                rows = []
            self._found(rows)
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._calls.pop(task, None)
            self._ended()

    async def stop(self) -> None:
        calls = list(self._calls)
        for task in calls:
            task.cancel()
        for task in calls:
            with contextlib.suppress(asyncio.CancelledError):
                await task
