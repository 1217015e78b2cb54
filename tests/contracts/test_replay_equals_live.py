"""A certification computed from replayed cassettes is identical to the one computed live when
they were recorded (cassettes/<provider>/<contract>/certification.json, written by
`jobrouter contracts run --cassettes cassettes --record`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobrouter.build import build_providers
from jobrouter.config import load_config
from jobrouter.contracts import Certification, certify, load_contract
from jobrouter.providers.cassettes import cassette
from jobrouter.recordings import LIVE_RECORD

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"
RECORDED = sorted(CASSETTES.glob(f"*/*/{LIVE_RECORD}"))


def test_every_routed_pair_was_recorded() -> None:
    config = load_config(CASSETTES / "jobrouter.toml")
    routed = {(p, t.contract) for t in config.tasks.values() for p in t.providers if t.contract}
    recorded = {(path.parent.parent.name, path.parent.name) for path in RECORDED}
    assert routed <= recorded, f"not recorded: {sorted(routed - recorded)}"


def _pair_id(path: Path) -> str:
    return f"{path.parent.parent.name}-{path.parent.name}"


def _read(path: Path) -> Certification:
    return Certification.model_validate_json(path.read_text())


@pytest.mark.parametrize("live_file", RECORDED, ids=_pair_id)
async def test_replayed_certification_equals_the_live_one(live_file: Path) -> None:
    live = _read(live_file)
    config = load_config(CASSETTES / "jobrouter.toml")
    provider = build_providers(config, None)[live.provider]
    try:
        with cassette(live_file.parent / "certify.yaml", record=False):
            replayed = await certify(
                provider,
                load_contract(live.contract),
                now=live.certified_at,
                ttl=live.expires_at - live.certified_at,
            )
    finally:
        await provider.close()  # type: ignore[attr-defined]
    assert replayed == live
