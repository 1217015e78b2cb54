"""The gate for "enable failover": one test per provider x contract x case, from cassettes.

The providers and routes are those of cassettes/jobrouter.toml (three local llama.cpp servers
serving Gemma 3 270M). Each (provider, contract) pair's certification was recorded into
cassettes/<provider>/<contract>/certify.yaml, all cases in order, so a pair is replayed ONCE
(`Replays`, module-scoped: `jobrouter.contracts.certify` under the cassette, strict replay, every
recorded interaction played) and each parameter then judges its own case's evidence.

A tiny model fails some golden cases for real. Those are not marked xfail: every case's verdict
is checked against tests/contracts/golden/local_verdicts.json ({provider: {contract: {case:
passed}}}), written from the recording after it was read, so a replay that ever turns a verdict
either way fails here. After re-recording, inspect and rewrite the file with
``python -m tests.contracts.test_provider_suite --write``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobrouter.build import build_tasks
from jobrouter.certifier import Pair, pairs_to_certify
from jobrouter.config import load_config
from jobrouter.contracts import Case, CaseEvidence, Certification, Contract, certify
from jobrouter.contracts.suite import case_params, describe_case
from jobrouter.providers import _litellm
from jobrouter.providers.cassettes import cassette, read_meta
from jobrouter.providers.transports import build_provider

ROOT = Path(__file__).resolve().parents[2]
CASSETTES = ROOT / "cassettes"
VERDICTS = Path(__file__).with_name("golden") / "local_verdicts.json"
CONFIG = load_config(CASSETTES / "jobrouter.toml")
PAIRS = pairs_to_certify(CONFIG, build_tasks(CONFIG))
NOW = datetime(2026, 1, 1, tzinfo=UTC)  # the records' timestamps; no verdict depends on it


@dataclass(frozen=True)
class Recorded:
    """A configured provider as a test parameter. `case_params` needs only the name; the real
    provider (of its configured transport) is built, replayed and closed inside one event loop
    by `Replays`, so no provider (nor litellm client) outlives the test that used it."""

    name: str


PARAMS = [
    param for pair in PAIRS for param in case_params([Recorded(pair.provider)], [pair.contract])
]


def rerecord(pair: Pair) -> str:
    return (
        "re-record: jobrouter contracts run -c cassettes/jobrouter.toml "
        f"--cassettes cassettes --record --provider {pair.provider} "
        f"--contract {pair.contract.name}"
    )


async def replay(pair: Pair) -> Certification:
    """Certify `pair` from its cassette: every request must be in it, every answer used."""
    folder = CASSETTES / pair.provider / pair.contract.name
    if not (folder / "meta.json").is_file():
        pytest.fail(f"{folder.relative_to(ROOT)} is not recorded (no meta.json); {rerecord(pair)}")
    provider = build_provider(pair.provider, CONFIG.providers[pair.provider])
    meta = read_meta(folder)
    if (meta.provider_fingerprint, meta.contract_fingerprint) != (
        provider.fingerprint,
        pair.contract_fingerprint,
    ):
        await provider.close()
        pytest.fail(f"{folder.relative_to(ROOT)} is stale (fingerprints changed); {rerecord(pair)}")
    try:
        with cassette(folder / "certify.yaml", record=False) as recording:
            certification = await certify(provider, pair.contract, now=NOW)
        assert recording.all_played, f"{folder} has answers no request used; {rerecord(pair)}"
    finally:
        await provider.close()
        await _litellm.close_clients()
    return certification


class Replays:
    """Each pair replayed at most once per module, on first use (so `-k` replays only what runs)."""

    def __init__(self) -> None:
        self._done: dict[tuple[str, str], Certification] = {}

    def certification(self, provider: str, contract: Contract) -> Certification:
        key = (provider, contract.name)
        if key not in self._done:
            pair = next(p for p in PAIRS if (p.provider, p.contract.name) == key)
            self._done[key] = asyncio.run(replay(pair))
        return self._done[key]

    def case(self, provider: str, contract: Contract, case: str) -> CaseEvidence:
        cases = self.certification(provider, contract).cases
        return next(evidence for evidence in cases if evidence.name == case)


@pytest.fixture(scope="module")
def replays() -> Replays:
    return Replays()


def expected_verdicts() -> dict[str, dict[str, dict[str, bool]]]:
    data: dict[str, dict[str, dict[str, bool]]] = json.loads(VERDICTS.read_text())
    return data


def test_the_expectations_cover_exactly_the_routed_cases() -> None:
    routed = {(p.provider, p.contract.name, c.name) for p in PAIRS for c in p.contract.cases}
    listed = {
        (provider, contract, case)
        for provider, contracts in expected_verdicts().items()
        for contract, cases in contracts.items()
        for case in cases
    }
    assert listed == routed, "inspect the recording, then update " + str(VERDICTS.name)


@pytest.mark.parametrize(("provider", "contract", "case"), PARAMS)
def test_recorded_case(
    replays: Replays, provider: Recorded, contract: Contract, case: Case
) -> None:
    expected = expected_verdicts().get(provider.name, {}).get(contract.name, {}).get(case.name)
    evidence = replays.case(provider.name, contract, case.name)
    report = describe_case(evidence)
    assert expected is not None, f"no expected verdict in {VERDICTS.name} for:\n{report}"
    verdict = "passed" if expected else "failed"
    assert evidence.passed is expected, f"recorded as {verdict}, the replay differs:\n{report}"


def main(argv: list[str]) -> None:
    """Replay every pair and print the verdicts as JSON (``--write``: into the golden file)."""
    verdicts: dict[str, dict[str, dict[str, bool]]] = {}
    for pair in PAIRS:
        certification = asyncio.run(replay(pair))
        for evidence in certification.cases:
            print(describe_case(evidence), file=sys.stderr)
            verdicts.setdefault(pair.provider, {}).setdefault(pair.contract.name, {})[
                evidence.name
            ] = evidence.passed
    text = json.dumps(verdicts, indent=2) + "\n"
    if "--write" in argv:
        VERDICTS.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main(sys.argv[1:])
