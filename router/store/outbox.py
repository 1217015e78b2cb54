"""The outbox store and retention: `OutboxStore` (`SqlStore.outbox`, SQL in queries.sql, like
every store query), the store of the deliverers (router/outbox.py, router/bus_nats.py), the
retention (router/retention.py) and `jobrouter outbox`.

Completion events are written by the job store, through `transitions.write_outbox`, in the
transaction of the terminal change (I8); that write tells `OutboxWritten`, which this store's
`on_outbox` listens to. Here they are claimed for delivery, marked delivered, rescheduled, buried
as dead letters and replayed; and finished jobs whose completion is no longer owed to a
configured webhook (delivered, or parked for an owner without one) are purged, in small batches.
Every retry fact (tries, next_attempt_at, last_error, the claim) lives in the row. The bus
relay's part of the outbox is bus.py (`OutboxStore.bus`); the row both read, `OutboxEvent`, and a
claim's parameters are outbox_rows.py (so bus.py need not import this module back).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from jobrouter.store.bus import BusOutbox
from jobrouter.store.connector import Connector, Row, Tx
from jobrouter.store.outbox_rows import OutboxEvent as OutboxEvent  # the deliverers' import
from jobrouter.store.outbox_rows import claim_params, event_from_row

REPLAY_BATCH = 500


@dataclass(frozen=True)
class OwnerDepth:
    owner: str
    pending: int  # undelivered events (parked ones included)
    retrying: int  # of those, events that failed at least once
    oldest: float  # created_at of the oldest
    next_attempt_at: float


class PurgeCounts(NamedTuple):
    purgeable: int  # terminal, old enough, completion not owed to any webhook
    kept_undelivered: int  # terminal, old enough, completion owed: pending for a webhook, or dead
    parked: int  # of the purgeable, those whose parked event (owner without a webhook) goes too


class Purged(NamedTuple):
    jobs: int
    parked: int  # parked events (of owners without a webhook) deleted with their jobs


@dataclass(frozen=True)
class OutboxCounts:
    pending: list[OwnerDepth]
    dead: dict[str, int]  # dead letters by owner


class OutboxWritten:
    """Who hears, in this process, that an outbox row was committed: the job store writes the
    row (`transitions.write_outbox` calls `outbox_in`), the deliverers listen through
    `OutboxStore.on_outbox`. One per `SqlStore`, shared by its job and outbox stores."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[str], None]] = []

    def on(self, callback: Callable[[str], None]) -> None:
        self._callbacks.append(callback)

    def forget(self, callback: Callable[[str], None]) -> None:
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def outbox_in(self, tx: Tx, owner: str) -> None:
        """An outbox row of `owner` is written in `tx`: tell the callbacks once it commits."""
        if self._callbacks:
            tx.after_commit(functools.partial(self._committed, owner))

    def _committed(self, owner: str) -> None:
        for callback in self._callbacks:
            callback(owner)


class OutboxStore:
    """The outbox over the one connector: delivery, dead letters, its reads and the retention
    of finished jobs. `bus`: the bus relay's part (bus.py)."""

    def __init__(self, connector: Connector, written: OutboxWritten, bus: BusOutbox) -> None:
        self.connector = connector
        self._q = connector.queries
        self._written = written
        self.bus = bus

    def on_outbox(self, callback: Callable[[str], None]) -> None:
        """Call `callback(owner)` after a transaction of this process commits an outbox row
        (a deliverer sends it at once instead of at its next poll)."""
        self._written.on(callback)

    def forget_outbox(self, callback: Callable[[str], None]) -> None:
        self._written.forget(callback)

    # ---- delivery ------------------------------------------------------------------------------

    async def claim_outbox(
        self, owners: Iterable[str], worker: str, *, claim_s: float, limit: int
    ) -> list[OutboxEvent]:
        """Due events of `owners`, claimed by `worker` for `claim_s`, oldest due first. A claim
        keeps other processes off the rows; when it expires (the worker died), they take over."""
        params = claim_params(owners, worker, claim_s=claim_s, limit=limit)
        if params is None:
            return []
        async with self.connector.write() as tx:
            rows = await tx.fetchall(self._q["claim_outbox"], params)
        events = [event_from_row(row) for row in rows]
        return sorted(events, key=lambda event: (event.next_attempt_at or 0.0, event.id))

    async def outbox_delivered(self, event_id: str) -> bool:
        """The receiver answered 2xx: the event is delivered (False: it already was)."""
        async with self.connector.write() as tx:
            count = await tx.execute(
                self._q["outbox_delivered"], {"id": event_id, "now": time.time()}
            )
        return count > 0

    async def outbox_retry(
        self, event_id: str, worker: str, *, error: str, next_attempt_at: float
    ) -> bool:
        """One more failed try, due again at `next_attempt_at`; the claim is given up. False
        when `worker` no longer holds the claim (it expired and another process took over)."""
        params = {
            "id": event_id,
            "worker": worker,
            "error": error,
            "next_attempt_at": next_attempt_at,
        }
        async with self.connector.write() as tx:
            count = await tx.execute(self._q["outbox_retry"], params)
        return count > 0

    async def outbox_bury(self, event_id: str, worker: str, *, error: str) -> bool:
        """The last allowed try failed: move the event to the dead letters, in one transaction.
        False when `worker` no longer holds the claim."""
        async with self.connector.write() as tx:
            row = await tx.fetchone(
                self._q["take_claimed_outbox"], {"id": event_id, "worker": worker}
            )
            if row is None:
                return False
            dead = {
                key: row[key] for key in ("id", "job_id", "owner", "kind", "payload", "created_at")
            }
            dead.update(tries=int(row["tries"]) + 1, last_error=error, now=time.time())
            await tx.execute(self._q["insert_dead"], dead)
        return True

    async def release_outbox_claims(self, worker: str) -> int:
        """A deliverer stopping cleanly hands its claimed events back (due at their time)."""
        async with self.connector.write() as tx:
            return await tx.execute(self._q["release_outbox_claims"], {"worker": worker})

    # ---- dead letters --------------------------------------------------------------------------

    async def replay_dead(self, event_id: str) -> bool:
        """Move one dead letter back to pending, due now, tries reset; False if no such one."""
        async with self.connector.write() as tx:
            row = await tx.fetchone(self._q["take_dead"], {"id": event_id})
            if row is not None:
                await self._insert_replayed(tx, row)
        return row is not None

    async def replay_all_dead(self, batch: int = REPLAY_BATCH) -> int:
        """Move every dead letter back to pending, `batch` per transaction. Returns how many."""
        moved = 0
        while True:
            async with self.connector.write() as tx:
                rows = await tx.fetchall(self._q["take_dead_batch"], {"limit": batch})
                for row in rows:
                    await self._insert_replayed(tx, row)
            moved += len(rows)
            if len(rows) < batch:
                return moved

    async def _insert_replayed(self, tx: Tx, row: Row) -> None:
        note = f"replayed after {row['tries']} tries; last error: {row['last_error']}"
        await tx.execute(
            self._q["insert_replayed"],
            {
                "id": row["id"],
                "job_id": row["job_id"],
                "owner": row["owner"],
                "kind": row["kind"],
                "payload": row["payload"],
                "created_at": row["created_at"],
                "now": time.time(),
                "last_error": note,
            },
        )

    # ---- reads ---------------------------------------------------------------------------------

    async def outbox_counts(self) -> OutboxCounts:
        """Depth of the outbox: undelivered events by owner, and dead letters by owner."""
        pending = await self.connector.fetchall(self._q["outbox_pending_by_owner"], {})
        dead = await self.connector.fetchall(self._q["outbox_dead_by_owner"], {})
        return OutboxCounts(
            pending=[
                OwnerDepth(
                    owner=row["owner"],
                    pending=int(row["pending"]),
                    retrying=int(row["retrying"] or 0),
                    oldest=float(row["oldest"]),
                    next_attempt_at=float(row["next_attempt_at"]),
                )
                for row in pending
            ],
            dead={row["owner"]: int(row["dead"]) for row in dead},
        )

    async def dead_letters(self, limit: int = 50) -> list[OutboxEvent]:
        """The newest dead letters first."""
        rows = await self.connector.fetchall(self._q["list_dead"], {"limit": limit})
        return [event_from_row(row) for row in rows]

    async def outbox_event(self, event_id: str) -> OutboxEvent | None:
        """A pending or delivered event (a dead letter is in `dead_letters`)."""
        row = await self.connector.fetchone(self._q["get_outbox_event"], {"id": event_id})
        return event_from_row(row) if row else None

    # ---- retention -----------------------------------------------------------------------------

    async def count_purgeable(
        self, cutoff: float, *, owners: Iterable[str], drop_parked: bool = False
    ) -> PurgeCounts:
        """Finished jobs last changed before `cutoff`, given the `owners` that have a webhook:
        purgeable now (and how many of those have a parked event), and kept because their
        completion event may still be owed (undelivered to an owner in `owners`, tried or
        claimed, a dead letter, or parked unless `drop_parked`)."""
        params = {"cutoff": cutoff, "owners": _owners_json(owners), "drop_parked": int(drop_parked)}
        purgeable = await self.connector.fetchone(self._q["count_purgeable"], params)
        kept = await self.connector.fetchone(self._q["count_kept_undelivered"], params)
        return PurgeCounts(
            purgeable=int(purgeable["n"]) if purgeable else 0,
            kept_undelivered=int(kept["n"]) if kept else 0,
            parked=int(purgeable["parked"] or 0) if purgeable else 0,
        )

    async def purge_batch(
        self, cutoff: float, limit: int, *, owners: Iterable[str], drop_parked: bool = False
    ) -> Purged:
        """Delete up to `limit` purgeable jobs (with their attempts, events and outbox row,
        delivered, or parked when `drop_parked`) in one short transaction. `owners` are those
        with a webhook: their undelivered events keep their jobs, as does any event that has
        been tried. Returns how many jobs and parked events went."""
        params = {
            "cutoff": cutoff,
            "limit": limit,
            "owners": _owners_json(owners),
            "drop_parked": int(drop_parked),
        }
        async with self.connector.write() as tx:
            rows = await tx.fetchall(self._q["purge_jobs"], params)
            ids = [row["id"] for row in rows]
            gone = []
            if ids:
                gone = await tx.fetchall(self._q["purge_outbox"], {"ids": json.dumps(ids)})
        return Purged(jobs=len(ids), parked=sum(1 for row in gone if row["delivered_at"] is None))


def _owners_json(owners: Iterable[str]) -> str:
    """The owners with a webhook as one JSON-array text parameter (a str is one owner, not a
    list of letters)."""
    return json.dumps(sorted({owners} if isinstance(owners, str) else set(owners)))
