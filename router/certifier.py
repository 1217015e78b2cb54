"""Certification from the router's side: which (provider, contract) pairs a configuration
implies, running `jobrouter.contracts.certify` on them, persisting the records, and the status
matrix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from jobrouter.build import warm_up
from jobrouter.config import RouterConfig
from jobrouter.errors import ConfigError
from jobrouter.providers import Provider
from jobrouter.store.certifications import CertificationStore
from jobrouter.store.live_watch import WatchRow
from jobrouter.tasks import TaskRuntime

if TYPE_CHECKING:
    from jobrouter.contracts import Certification, Contract, Validity


@dataclass(frozen=True)
class Pair:
    provider: str
    contract: Contract
    contract_fingerprint: str
    # The provider config's waivers (check -> reason): which `unverified` checks may pass.
    accept_unverified: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Cell:
    """One matrix cell: what the stored record says of the pair now, and why."""

    provider: str
    contract: str
    status: Validity
    detail: str
    certification: Certification | None = None
    watch: WatchRow | None = None  # what its live answers showed since (router/watch.py)


def pairs_to_certify(
    config: RouterConfig,
    tasks: Mapping[str, TaskRuntime],
    *,
    provider: str | None = None,
    contract: str | None = None,
) -> list[Pair]:
    """Every (provider, contract) the configured tasks route to, filtered by the options."""
    seen: dict[tuple[str, str], Pair] = {}
    for task in tasks.values():
        if task.contract is None or task.contract_fingerprint is None:
            continue
        for name in task.policy.providers:
            key = (name, task.contract.name)
            if key not in seen:
                provider_config = config.providers.get(name)
                waivers = (
                    {str(k): v for k, v in provider_config.accept_unverified.items()}
                    if provider_config
                    else {}
                )
                seen[key] = Pair(name, task.contract, task.contract_fingerprint, waivers)
    chosen = [
        p
        for p in seen.values()
        if (provider is None or p.provider == provider)
        and (contract is None or p.contract.name == contract)
    ]
    if not chosen:
        known = ", ".join(f"{p.provider} x {p.contract.name}" for p in seen.values()) or "none"
        raise ConfigError(
            f"nothing to certify for provider={provider or 'any'} "
            f"contract={contract or 'any'}; the config routes: {known}"
        )
    return chosen


async def certify_pair(
    store: CertificationStore,
    provider: Provider,
    pair: Pair,
    *,
    ttl_days: float,
    now: datetime | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Certification:
    """Certify the pair now and keep the record (the gate routes by it)."""
    certification = await certify_now(provider, pair, ttl_days=ttl_days, now=now, progress=progress)
    await store.save_certification(
        provider=certification.provider,
        contract=certification.contract,
        provider_fingerprint=certification.provider_fingerprint,
        contract_fingerprint=certification.contract_fingerprint,
        passed=certification.passed,
        record=certification.model_dump_json(),
        certified_at=certification.certified_at.timestamp(),
        expires_at=certification.expires_at.timestamp(),
    )
    return certification


async def certify_now(
    provider: Provider,
    pair: Pair,
    *,
    ttl_days: float,
    now: datetime | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Certification:
    """Certify the pair now, keeping nothing: `certify_pair` keeps it, a comparison with a
    recording (`contracts run --compare-recorded`) only reads it."""
    from jobrouter.contracts import certify

    await warm_up([provider])  # the first case's deadline must not pay litellm's first call
    return await certify(
        provider,
        pair.contract,
        now=now,
        ttl=timedelta(days=ttl_days),
        progress=progress,
        accept_unverified=pair.accept_unverified,
    )


async def matrix(
    store: CertificationStore,
    providers: Mapping[str, Provider],
    pairs: Iterable[Pair],
    now: datetime | None = None,
) -> list[Cell]:
    """The stored status of each pair, without calling anyone."""
    from jobrouter.contracts import Certification, Validity

    records = {(r.provider, r.contract): r.record for r in await store.list_certifications()}
    watches = await store.live.watches()
    when = now or datetime.now(UTC)
    cells = []
    for pair in pairs:
        record = records.get((pair.provider, pair.contract.name))
        watch = watches.get((pair.provider, pair.contract.name))
        if record is None:
            cells.append(
                Cell(
                    pair.provider,
                    pair.contract.name,
                    Validity.MISSING,
                    "never certified",
                    None,
                    watch,
                )
            )
            continue
        cert = Certification.parse_stored(record)
        if cert is None:
            cells.append(
                Cell(
                    pair.provider,
                    pair.contract.name,
                    Validity.STALE,
                    "stale: recorded by an older jobrouter; certify again",
                    None,
                    watch,
                )
            )
            continue
        validity, reason = cert.validity_for(
            pair.contract_fingerprint, providers[pair.provider].fingerprint, when
        )
        if validity.valid and watch is not None and watch.suspension is not None:
            validity, reason = Validity.SUSPENDED, f"suspended: {watch.suspension.reason}"
        cells.append(Cell(pair.provider, pair.contract.name, validity, reason, cert, watch))
    return cells
