"""Provider circuits in the store: `CircuitStore` (`SqlStore.circuits`, used by router/breaker.py).

Circuits (router/breaker.py) live in the database so every router process on it sees the same
circuit. (Certification records: certifications.py.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from jobrouter.states import CircuitState
from jobrouter.store.connector import Connector


@dataclass(frozen=True)
class CircuitRow:
    provider: str
    state: CircuitState
    failures: int
    opened_at: float | None
    probe_until: float | None


class CircuitStore:
    """Every provider's circuit, shared by the router processes on the database."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._q = connector.queries

    async def list_circuits(self) -> list[CircuitRow]:
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
            row = await tx.fetchone(
                self._q["circuit_success"], {"provider": provider, "now": time.time()}
            )
        if row is None:
            return CircuitRow(provider, CircuitState.CLOSED, 0, None, None)
        return _circuit(row)

    async def claim_probe(self, provider: str, *, cooldown_s: float, probe_s: float) -> bool:
        params = {
            "provider": provider,
            "now": time.time(),
            "cooldown_s": cooldown_s,
            "probe_s": probe_s,
        }
        async with self.connector.write() as tx:
            return await tx.fetchone(self._q["claim_probe"], params) is not None


def _circuit(row: dict[str, Any]) -> CircuitRow:
    return CircuitRow(
        row["provider"],
        CircuitState(row["state"]),
        int(row["failures"]),
        row["opened_at"],
        row["probe_until"],
    )
