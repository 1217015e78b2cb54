"""Provider health and certifications in the store: a mixin of `SqlStore`.

Circuits (router/breaker.py) live here so every router process on the database sees the same
circuit; certification records (contracts.Certification as JSON) so every process routes by them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from router.store.connector import Connector


@dataclass(frozen=True)
class CircuitRow:
    provider: str
    state: str  # closed | open | half_open
    failures: int
    opened_at: float | None
    probe_until: float | None


@dataclass(frozen=True)
class CertificationRow:
    provider: str
    contract: str
    record: str  # the certification as JSON (contracts.Certification)


class CircuitMethods:
    connector: Connector
    _q: Mapping[str, str]

    async def circuits(self) -> list[CircuitRow]:
        rows = await self.connector.fetchall(self._q["list_circuits"], {})
        return [_circuit(row) for row in rows]

    async def circuit_failure(self, provider: str, *, threshold: int) -> CircuitRow:
        params = {"provider": provider, "threshold": threshold, "now": time.time()}
        async with self.connector.write() as tx:
            row = await tx.fetchone(self._q["circuit_failure"], params)
        assert row is not None
        return _circuit(row)

    async def circuit_success(self, provider: str) -> CircuitRow:
        async with self.connector.write() as tx:
            row = await tx.fetchone(self._q["circuit_success"],
                                    {"provider": provider, "now": time.time()})
        if row is None:
            return CircuitRow(provider, "closed", 0, None, None)
        return _circuit(row)

    async def claim_probe(self, provider: str, *, cooldown_s: float, probe_s: float) -> bool:
        params = {"provider": provider, "now": time.time(), "cooldown_s": cooldown_s,
                  "probe_s": probe_s}
        async with self.connector.write() as tx:
            return await tx.fetchone(self._q["claim_probe"], params) is not None

    async def save_certification(
        self, *, provider: str, contract: str, provider_fingerprint: str,
        contract_fingerprint: str, passed: bool, record: str, certified_at: float,
        expires_at: float,
    ) -> None:  # fmt: skip
        async with self.connector.write() as tx:
            await tx.execute(self._q["upsert_certification"], {
                "provider": provider, "contract": contract,
                "provider_fingerprint": provider_fingerprint,
                "contract_fingerprint": contract_fingerprint, "passed": int(passed),
                "record": record, "certified_at": certified_at, "expires_at": expires_at})

    async def certifications(self) -> list[CertificationRow]:
        rows = await self.connector.fetchall(self._q["list_certifications"], {})
        return [CertificationRow(row["provider"], row["contract"], row["record"]) for row in rows]


def _circuit(row: dict[str, Any]) -> CircuitRow:
    return CircuitRow(row["provider"], row["state"], int(row["failures"]), row["opened_at"],
                      row["probe_until"])
