"""`jobrouter contracts run --compare-recorded DIR` (router/cli/contracts.py): each pair
certified live, held against the certification recorded beside its cassette
(DIR/<provider>/<contract>/certification.json); `contracts run` and `contracts check` print the
contracts' warnings (`jobrouter.contracts.lint`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from jobrouter.api import Router
from jobrouter.certifier import Pair, certify_now
from jobrouter.config import RouterConfig
from jobrouter.recordings import LIVE_RECORD

if TYPE_CHECKING:
    from jobrouter.contracts import Certification
    from jobrouter.contracts.compare import Comparison
    from jobrouter.contracts.lint import ContractWarning


async def compare_pairs(
    router: Router, cfg: RouterConfig, pairs: Sequence[Pair], root: Path
) -> list[Comparison]:
    """Certify each pair live (keeping nothing) and compare it with its recording."""
    from jobrouter.contracts import Certification
    from jobrouter.contracts.compare import compare, not_recorded

    comparisons = []
    for pair in pairs:
        path = root / pair.provider / pair.contract.name / LIVE_RECORD
        if not path.is_file():
            comparisons.append(not_recorded(pair.provider, pair.contract.name, str(path)))
            continue
        recorded = Certification.model_validate_json(path.read_text())
        live = await certify_now(
            router.providers[pair.provider], pair, ttl_days=cfg.certification.ttl_days
        )
        comparisons.append(compare(recorded, live))
    return comparisons


def warnings_of(
    pairs: Iterable[Pair], certifications: Iterable[Certification]
) -> list[ContractWarning]:
    """The warnings of each pair's contract, once per contract, with the answers of those
    `certifications` made for the contract as it is now (its current fingerprint)."""
    from jobrouter.contracts.lint import contract_warnings

    records = list(certifications)
    contracts = {pair.contract.name: pair for pair in pairs}
    warnings = []
    for name, pair in sorted(contracts.items()):
        current = [
            c
            for c in records
            if c.contract == name and c.contract_fingerprint == pair.contract_fingerprint
        ]
        warnings += contract_warnings(pair.contract, current)
    return warnings
