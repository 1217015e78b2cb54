"""Run contract cases under pytest: one test per provider, contract and case.

    import pytest
    from jobrouter.contracts import load_contract
    from jobrouter.contracts.suite import assert_case_passes, case_params

    PROVIDERS = [make_provider("local")]          # constructed without connecting
    CONTRACTS = [load_contract("extract_product"), load_contract("review_sentiment")]

    @pytest.mark.parametrize(("provider", "contract", "case"), case_params(PROVIDERS, CONTRACTS))
    async def test_contract_case(provider, contract, case):
        await assert_case_passes(provider, contract, case)

Test ids read ``<provider>-<contract>-<case>`` so ``-k "review_sentiment and sarcasm"`` selects
one case. pytest is imported only when `case_params` is called, so this module (and the rest of
`contracts`) does not need pytest at run time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobrouter.contracts.certification import CaseEvidence
from jobrouter.contracts.certify import certify_case
from jobrouter.contracts.model import Case, Contract
from jobrouter.providers.base import Provider

if TYPE_CHECKING:
    from _pytest.mark.structures import ParameterSet


def case_params(
    providers: Sequence[Provider],
    contracts: Sequence[Contract],
    *,
    marks: Iterable[Any] = (),
) -> list[ParameterSet]:
    """``pytest.param(provider, contract, case)`` for every combination, with readable ids."""
    import pytest  # optional dependency: only needed when building a test suite

    marks = tuple(marks)
    return [
        pytest.param(
            provider, contract, case, id=f"{provider.name}-{contract.name}-{case.name}", marks=marks
        )
        for provider in providers
        for contract in contracts
        for case in contract.cases
    ]


def describe_case(evidence: CaseEvidence) -> str:
    """A readable report of one case: verdict, agreement, failures and the outputs received."""
    verdict = "passed" if evidence.passed else "FAILED"
    share = "n/a" if evidence.agreement is None else f"{evidence.agreement:.2f}"
    lines = [
        f"case {evidence.name}: {verdict}, verdict {evidence.verdict} (runs {evidence.runs}, "
        f"agreement {share})"
    ]
    lines += [f"  - {failure}" for failure in evidence.failures]
    if evidence.stability is not None:
        lines.append(f"  stability: {evidence.stability}")
    lines += [f"  unverified: {reason}" for reason in evidence.rendering.unverified]
    if evidence.rendering.waived:
        lines.append(f"  waived: {evidence.rendering.waived}")
    lines += [f"  output: {output!r}" for output in evidence.outputs]
    lines += [f"  note: {note}" for note in evidence.rendering.notes]
    return "\n".join(lines)


async def assert_case_passes(
    provider: Provider,
    contract: Contract,
    case: Case,
    *,
    accept_unverified: Mapping[str, str] | None = None,
) -> CaseEvidence:
    """Certify one case; raise `AssertionError` with `describe_case` text if it did not pass
    (an ``unverified`` case passes only under `accept_unverified`, as in certification)."""
    evidence = await certify_case(provider, contract, case, accept_unverified=accept_unverified)
    if not evidence.passed:
        raise AssertionError(describe_case(evidence))
    return evidence
