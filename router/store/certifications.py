"""Certification records in the store (contracts.Certification as JSON), so every router
process on the database routes by the same ones: `CertificationStore` (`SqlStore.certifications`,
used by the certifier, the gate and the expiry warning)."""

from __future__ import annotations

from dataclasses import dataclass

from jobrouter.store.connector import Connector


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

    async def list_certifications(self) -> list[CertificationRow]:
        rows = await self.connector.fetchall(self._q["list_certifications"], {})
        return [CertificationRow(row["provider"], row["contract"], row["record"]) for row in rows]
