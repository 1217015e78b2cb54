"""An outbox row as its deliverers see it (`OutboxEvent`, read from a row by
`event_from_row`) and the parameters of a claim of rows: shared by the outbox store (outbox.py)
and its bus relay part (bus.py), which outbox.py holds; kept here so that neither of the two
imports the other back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jobrouter.store.connector import Row


@dataclass(frozen=True)
class OutboxEvent:
    """One completion event: `id` is its idempotency key for receivers."""

    id: str
    job_id: str
    owner: str
    kind: str
    payload: str  # the event as JSON text, exactly as written with the terminal change
    created_at: float
    tries: int  # delivery tries so far
    next_attempt_at: float | None = None
    last_error: str | None = None
    delivered_at: float | None = None
    claimed_by: str | None = None
    dead_at: float | None = None  # set on dead letters only


def claim_params(
    owners: Iterable[str], worker: str, *, claim_s: float, limit: int
) -> dict[str, Any] | None:
    """The parameters of an outbox claim (webhook delivery or the bus relay); None: nothing to
    claim (no owner, or no room)."""
    wanted = sorted(set(owners))
    if not wanted or limit <= 0:
        return None
    now = time.time()
    return {
        "owners": json.dumps(wanted),
        "worker": worker,
        "now": now,
        "claim_until": now + claim_s,
        "limit": limit,
    }


def event_from_row(row: Row) -> OutboxEvent:
    return OutboxEvent(
        id=row["id"],
        job_id=row["job_id"],
        owner=row["owner"],
        kind=row["kind"],
        payload=row["payload"],
        created_at=float(row["created_at"]),
        tries=int(row["tries"]),
        next_attempt_at=row.get("next_attempt_at"),
        last_error=row.get("last_error"),
        delivered_at=row.get("delivered_at"),
        claimed_by=row.get("claimed_by"),
        dead_at=row.get("dead_at"),
    )
