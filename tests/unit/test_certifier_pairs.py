"""The provider config's waiver reaches certification through every path that certifies: each
path builds its pairs with `pairs_to_certify`, and `certify_pair` passes the pair's waiver on."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from jobrouter.build import build_providers, build_tasks
from jobrouter.certifier import matrix, pairs_to_certify
from jobrouter.config import DatabaseConfig, RouterConfig, TaskConfig
from jobrouter.providers.config import ProviderConfig

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts" / "library"
REASON = "hosted API, template not visible; accepted by ops 2026-12-01"


def test_pairs_carry_the_providers_waiver() -> None:
    config = RouterConfig(
        database=DatabaseConfig(url="sqlite:///unused.db"),
        providers={
            "hosted": ProviderConfig(
                model="openai/gpt-4o-mini", accept_unverified={"rendering": REASON}
            ),
            "local": ProviderConfig(model="openai/gemma-3-270m"),
        },
        tasks={
            "title": TaskConfig(
                contract=str(CONTRACTS / "product_title.yaml"), providers=["hosted", "local"]
            )
        },
    )
    pairs = {pair.provider: pair for pair in pairs_to_certify(config, build_tasks(config))}
    assert dict(pairs["hosted"].accept_unverified) == {"rendering": REASON}
    assert dict(pairs["local"].accept_unverified) == {}


# A record as the version before verdicts stored it: failures as plain lines, no verdicts.
OLD_RECORD = json.dumps(
    {
        "provider": "hosted",
        "provider_fingerprint": "p",
        "contract": "product_title",
        "contract_version": 2,
        "contract_fingerprint": "c",
        "passed": True,
        "cases": [
            {
                "name": "tea",
                "passed": True,
                "rendering": {"ok": True},
                "runs": 3,
                "failures": [],
                "agreement": 1.0,
            }
        ],
        "failures": [],
        "certified_at": "2026-11-29T10:00:00Z",
        "expires_at": "2099-01-01T00:00:00Z",
    }
)


@dataclass
class Row:
    provider: str
    contract: str
    record: str


class NoWatches:
    async def watches(self) -> dict[tuple[str, str], object]:
        return {}


class OldStore:
    live = NoWatches()

    async def list_certifications(self) -> list[Row]:
        return [Row("hosted", "product_title", OLD_RECORD)]


async def test_a_record_from_before_the_verdicts_is_stale_not_a_pass() -> None:
    """It passed back when a null check passed: it proves nothing the certifier checks now."""
    from jobrouter.contracts import Certification

    assert Certification.parse_stored(OLD_RECORD) is None
    config = RouterConfig(
        database=DatabaseConfig(url="sqlite:///unused.db"),
        providers={"hosted": ProviderConfig(model="openai/gpt-4o-mini")},
        tasks={
            "title": TaskConfig(
                contract=str(CONTRACTS / "product_title.yaml"), providers=["hosted"]
            )
        },
    )
    pairs = pairs_to_certify(config, build_tasks(config))
    providers = build_providers(config, None)
    [cell] = await matrix(OldStore(), providers, pairs)  # type: ignore[arg-type]
    assert (cell.status, cell.detail) == (
        "stale",
        "stale: recorded by an older jobrouter; certify again",
    )
