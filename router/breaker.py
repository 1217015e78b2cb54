"""Per-provider circuit breaker: closed -> open after `failure_threshold` consecutive failures;
after `cooldown_s` exactly one probe goes through (half-open, claimed atomically in the store so
one process in the whole fleet gets it); the probe's success closes it, its failure reopens it.

The state lives in the store (`circuits` table) so every router process on the database sees the
same circuit; each process reads it at most every `refresh_s` (one query for all providers).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from jobrouter.policy import Eligibility
from jobrouter.providers import ProviderError
from jobrouter.states import CircuitState
from jobrouter.store.circuits import CircuitRow, CircuitStore

log = logging.getLogger("jobrouter.engine")


@dataclass(frozen=True)
class BreakerSettings:
    failure_threshold: int = 5
    cooldown_s: float = 30.0
    probe_s: float = 60.0  # a probe not reported within this is assumed lost; another may go
    refresh_s: float = 1.0


class Breakers:
    def __init__(self, store: CircuitStore, settings: BreakerSettings) -> None:
        self.store = store
        self.settings = settings
        self._circuits: dict[str, CircuitRow] = {}
        self._read_at = float("-inf")
        self._reading: asyncio.Future[None] | None = None
        self._reading_after = 0  # the `_forgotten` count the read in flight started after
        self._forgotten = 0  # times this process changed what is read: reads before are old

    async def verdict(self, provider: str) -> Eligibility:
        """May this provider get an attempt now, as far as its circuit goes?"""
        circuit = (await self._current()).get(provider)
        now = time.time()
        if circuit is None or circuit.state.passes_all:
            return Eligibility(True)
        if circuit.state is CircuitState.OPEN:
            reopen_at = (circuit.opened_at or now) + self.settings.cooldown_s
            if now < reopen_at:
                return Eligibility(
                    False,
                    f"circuit open after {circuit.failures} failures; "
                    "next probe in "
                    f"{reopen_at - now:.0f}s",
                    retry_at=reopen_at,
                )
            return Eligibility(True, "circuit half-open: this attempt is the probe")
        probe_until = circuit.probe_until or now
        if now < probe_until:
            # Look again soon, not at probe_until: a probe that succeeds closes the circuit in
            # seconds, and jobs parked until probe_until would idle a whole probe timeout.
            return Eligibility(
                False,
                "circuit half-open: a probe is in flight",
                retry_at=min(probe_until, now + self.settings.refresh_s),
            )
        return Eligibility(True, "circuit half-open: the last probe was lost; probing again")

    async def acquire(self, provider: str) -> bool:
        """Claim the right to call: always for a closed circuit; for an open one, the single
        probe (atomically, fleet-wide)."""
        circuit = (await self._current()).get(provider)
        if circuit is None or circuit.state.passes_all:
            return True
        got = await self.store.claim_probe(
            provider, cooldown_s=self.settings.cooldown_s, probe_s=self.settings.probe_s
        )
        self._read_at = float("-inf")  # re-read: the circuit changed, here or elsewhere
        self._forgotten += 1
        return got

    async def record(self, provider: str, error: ProviderError | None) -> None:
        """Count a call's outcome on the provider's circuit. A failure to write it is logged,
        never raised: health bookkeeping must never lose an attempt's outcome."""
        if error is not None and not error.counts_against_health:  # decided in providers/
            return
        try:
            await self._record(provider, error)
        except Exception:
            log.exception("recording the health of provider %s failed", provider)

    async def _record(self, provider: str, error: ProviderError | None) -> None:
        circuit = self._circuits.get(provider)
        if error is None:
            if circuit is not None and (not circuit.state.passes_all or circuit.failures):
                self._circuits[provider] = await self.store.circuit_success(provider)
            return
        self._circuits[provider] = await self.store.circuit_failure(
            provider, threshold=self.settings.failure_threshold
        )

    async def _current(self) -> dict[str, CircuitRow]:
        """The circuits, read again every `refresh_s`: by ONE read however many callers find
        them due at once (64 drivers deciding together made 17 reads a second, each a
        transaction on PostgreSQL)."""
        if time.monotonic() - self._read_at >= self.settings.refresh_s:
            if self._reading is None or self._reading_after != self._forgotten:
                self._reading_after = self._forgotten
                self._reading = asyncio.ensure_future(self._read(self._forgotten))
            await asyncio.shield(self._reading)
        return self._circuits

    async def _read(self, forgotten: int) -> None:
        try:
            self._circuits = {row.provider: row for row in await self.store.list_circuits()}
            if forgotten == self._forgotten:  # else a change here came after: read again
                self._read_at = time.monotonic()
        finally:
            if self._reading_after == forgotten:
                self._reading = None
