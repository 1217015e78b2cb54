"""Agreement failures say whether the runs disagreed or agreed on something unusable (issue 32
item 3). Before, two runs returning the same invalid JSON read "0/2 runs agree", which reads as
inconsistency; the model was consistent, and consistently invalid."""

from __future__ import annotations

from datetime import UTC, datetime

from jobrouter.contracts import Contract, certify
from tests.contracts.test_contract_certify import GOOD_ANSWERS, POSITIVE, Answer, InspectableFake

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


async def _agreement_line(contract: Contract, script: list[Answer]) -> str:
    provider = InspectableFake({**GOOD_ANSWERS, "Great mug": script})
    case = (await certify(provider, contract, now=NOW)).cases[0]
    return next(f.detail for f in case.failures if f.check == "agreement")


async def test_identical_invalid_answers_are_said_to_be_identical(contract: Contract) -> None:
    """mutant: the `len(answers) == 1` condition dropped (every all-unusable case read as
    identical), seen failing in the next test; the branch removed, seen failing here."""
    line = await _agreement_line(contract, ['{"sentiment": "positive", "reason": "cut'])
    assert line == (
        "all 3 runs identical but invalid (json): no usable output to agree on [sentiment] "
        "(share 0.00 < min_agreement 0.67)"
    )


async def test_differing_invalid_answers_are_not_called_identical(contract: Contract) -> None:
    line = await _agreement_line(contract, ['{"sentiment": "pos', '{"sentiment": "neg'])
    assert line == (
        "0/3 runs usable (json): no output to agree on [sentiment] "
        "(share 0.00 < min_agreement 0.67)"
    )


async def test_usable_runs_that_differ_disagree_and_the_unusable_are_counted(
    contract: Contract,
) -> None:
    """mutant: the `distinct > 1` part removed, seen failing."""
    mixed = {"sentiment": "mixed", "reason": "unsure"}
    line = await _agreement_line(contract, [POSITIVE, mixed, "not json"])
    assert line == (
        "1/3 runs agree on [sentiment]; runs disagree: 2 different answers; "
        "1 without a usable output (json) (share 0.33 < min_agreement 0.67)"
    )
