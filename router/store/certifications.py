"""Certification records in the store (contracts.Certification as JSON), so every router
process on the database routes by the same ones: `CertificationStore` (`SqlStore.certifications`,
used by the certifier, the gate and the expiry warning)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from jobrouter.store.connector import Connector
from jobrouter.store.live_watch import LiveWatchStore, Suspension, drop_pending_of_pair


@dataclass(frozen=True)
class CertificationRow:
    provider: str
    contract: str
    record: str  # the certification as JSON (contracts.Certification)


class CertificationStore:
    """The latest certification of each (provider, contract) pair."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._q = connector.queries
        self.live = LiveWatchStore(connector)  # the watch of each pair's live answers

    async def save_certification(
        self,
        *,
        provider: str,
        contract: str,
        provider_fingerprint: str,
        contract_fingerprint: str,
        passed: bool,
        record: str,
        certified_at: float,
        expires_at: float,
    ) -> None:
        async with self.connector.write() as tx:
            await tx.execute(
                self._q["upsert_certification"],
                {
                    "provider": provider,
                    "contract": contract,
                    "provider_fingerprint": provider_fingerprint,
                    "contract_fingerprint": contract_fingerprint,
                    "passed": int(passed),
                    "record": record,
                    "certified_at": certified_at,
                    "expires_at": expires_at,
                },
            )
            # a new certification starts a fresh live watch (router/watch.py): whatever was
            # seen or suspended before speaks of what was certified before
            pair = {"provider": provider, "contract": contract}
            await drop_pending_of_pair(self._q, tx, pair)
            await tx.execute(self._q["delete_live_watch"], pair)
            await tx.execute(self._q["delete_live_watch_points"], pair)

    async def list_certifications(self) -> list[CertificationRow]:
        rows = await self.connector.fetchall(self._q["list_certifications"], {})
        return [CertificationRow(row["provider"], row["contract"], row["record"]) for row in rows]

    async def list_suspensions(self) -> dict[tuple[str, str], Suspension]:
        """The pairs live traffic suspended (router/watch.py), read with the certifications:
        a suspension is a state of the certification, seen by every process within a refresh."""
        rows = await self.connector.fetchall(self._q["list_suspensions"], {})
        return {
            (row["provider"], row["contract"]): Suspension.from_row(
                float(row["suspended_at"]), row["suspension"]
            )
            for row in rows
        }

    async def claim_probe(self, provider: str, *, now: float, interval_s: float) -> int | None:
        """The turn of `provider`'s golden probe if one is due at `now` (its next one then due
        `interval_s` later), else None: send the probe only on a turn. A provider not scheduled
        yet is scheduled for one interval on. The claim commits before the probe is sent, so a
        probe that crashes is not sent again before its next turn: the cap is never exceeded."""
        params = {"provider": provider, "now": now, "interval": interval_s}
        async with self.connector.write() as tx:
            await tx.execute(self._q["schedule_probe"], params)
            row = await tx.fetchone(self._q["claim_probe_turn"], params)
        return None if row is None else int(row["turn"])

    async def reinstate(self, *, provider: str, contract: str, by: str, reason: str) -> bool:
        """Lift a suspension on an operator's word (kept: who, why, when). False: the pair was
        not suspended."""
        params = {"provider": provider, "contract": contract, "by": by, "reason": reason}
        async with self.connector.write() as tx:
            changed = await tx.execute(self._q["reinstate_watch"], {**params, "now": time.time()})
            if changed:  # the watch starts from zero: answers not folded yet came before
                pair = {"provider": provider, "contract": contract}
                await drop_pending_of_pair(self._q, tx, pair)
                await tx.execute(self._q["delete_live_watch_points"], pair)
        return changed > 0
