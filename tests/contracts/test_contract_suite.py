"""The pytest helper: one parameter per provider, contract and case; readable failures."""

from __future__ import annotations

import json

import pytest

from jobrouter.contracts import CaseEvidence, Contract, RenderingEvidence, load_contract
from jobrouter.contracts.suite import assert_case_passes, case_params, describe_case
from jobrouter.providers.base import Completion, CompletionRequest
from tests.support.fakes import Lifecycle


class Constant(Lifecycle):
    """A provider that always answers the same output."""

    def __init__(self, name: str, output: dict[str, str]) -> None:
        self._name = name
        self._output = output

    @property
    def name(self) -> str:
        return self._name

    @property
    def fingerprint(self) -> str:
        return f"{self._name}-v1"

    async def complete(self, request: CompletionRequest) -> Completion:
        return Completion(text=json.dumps(self._output), output=self._output)


POSITIVE = {"sentiment": "positive", "reason": "likes it"}


def test_case_params_cover_every_combination_with_readable_ids(contract: Contract) -> None:
    providers = [Constant("local", POSITIVE), Constant("hosted", POSITIVE)]
    review = load_contract("review_sentiment")
    params = case_params(providers, [contract, review], marks=[pytest.mark.slow])
    assert len(params) == 2 * (len(contract.cases) + len(review.cases))
    ids = [p.id for p in params]
    assert ids[:2] == ["local-sentiment-good", "local-sentiment-bad"]
    assert "hosted-review_sentiment-sarcasm" in ids
    first = params[0]
    assert first.values == (providers[0], contract, contract.cases[0])
    assert [m.name for m in first.marks] == ["slow"]


async def test_assert_case_passes_returns_evidence_or_raises_with_failures(
    contract: Contract,
) -> None:
    provider = Constant("local", POSITIVE)
    waiver = {"rendering": "a constant answer: nothing to inspect"}
    evidence = await assert_case_passes(
        provider, contract, contract.case("good"), accept_unverified=waiver
    )
    assert evidence.passed and evidence.outputs == (POSITIVE,) * 3
    with pytest.raises(AssertionError) as info:  # unverified, and no waiver
        await assert_case_passes(provider, contract, contract.case("good"))
    assert str(info.value).startswith("case good: FAILED, verdict unverified")
    assert "unverified: prompt inspection unavailable" in str(info.value)
    with pytest.raises(AssertionError) as info:
        await assert_case_passes(provider, contract, contract.case("bad"), accept_unverified=waiver)
    text = str(info.value)
    assert text.startswith("case bad: FAILED, verdict fail (runs 3, agreement 1.00)")
    assert (
        '- behaviour: equals: run 1/3: case expectation at sentiment: found "positive", '
        'expected "negative"'
    ) in text


def test_describe_case_of_a_passing_case() -> None:
    evidence = CaseEvidence(
        name="good",
        passed=True,
        verdict="pass",
        rendering=RenderingEvidence(ok=True),
        runs=1,
        agreement=1.0,
    )
    assert describe_case(evidence) == "case good: passed, verdict pass (runs 1, agreement 1.00)"


def test_describe_case_says_how_stable_the_runs_were() -> None:
    """Mutant: describe_case leaves the stability line out."""
    evidence = CaseEvidence(
        name="good",
        passed=True,
        verdict="pass",
        rendering=RenderingEvidence(ok=True),
        runs=3,
        agreement=2 / 3,
        agreement_margin=0.0,
        distinct_answers=2,
        differing_runs=1,
        finish_reasons=("stop", "length", "stop"),
    )
    assert describe_case(evidence).splitlines()[1] == (
        "  stability: 2 distinct answers, 1 of 3 runs differ from the most common; agreement "
        "margin +0.00; finish reasons [stop, length, stop]"
    )
