"""The provider config's waiver reaches certification through every path that certifies: each
path builds its pairs with `pairs_to_certify`, and `certify_pair` passes the pair's waiver on."""

from __future__ import annotations

from pathlib import Path

from providers.config import ProviderConfig
from router.build import build_tasks
from router.certifier import pairs_to_certify
from router.config import DatabaseConfig, RouterConfig, TaskConfig

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts" / "library"
REASON = "hosted API, template not visible; accepted by ops 2026-12-01"


def test_pairs_carry_the_providers_waiver() -> None:
    config = RouterConfig(
        database=DatabaseConfig(url="sqlite:///unused.db"),
        providers={"hosted": ProviderConfig(model="openai/gpt-4o-mini",
                                            accept_unverified={"rendering": REASON}),
                   "local": ProviderConfig(model="openai/gemma-3-270m")},
        tasks={"title": TaskConfig(contract=str(CONTRACTS / "product_title.yaml"),
                                   providers=["hosted", "local"])},
    )  # fmt: skip
    pairs = {pair.provider: pair for pair in pairs_to_certify(config, build_tasks(config))}
    assert dict(pairs["hosted"].accept_unverified) == {"rendering": REASON}
    assert dict(pairs["local"].accept_unverified) == {}
