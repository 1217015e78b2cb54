"""The example contracts are self-consistent: an answer meeting every expectation certifies.

An "oracle" provider builds, for each case, the output that its expectations describe. If a
golden case contradicted the output schema or the contract's checks (say, a currency code the
schema's pattern refuses, or a null price the schema does not allow), this would fail.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from jobrouter.contracts import (
    ContainsCheck,
    Contract,
    EqualsCheck,
    IsNullCheck,
    NumberCheck,
    OneOfCheck,
    certify,
    load_contract,
)
from jobrouter.providers.base import Completion, CompletionRequest
from tests.support.fakes import Lifecycle

FILLERS: dict[str, Any] = {"reason": "short reason", "text": "", "name": "item"}


def oracle_output(contract: Contract, case_name: str) -> dict[str, Any]:
    output = dict(FILLERS)
    for spec in contract.case(case_name).expect:
        if isinstance(spec, ContainsCheck):
            output[spec.path] = f"{output[spec.path]} {spec.value}"
        elif isinstance(spec, EqualsCheck | NumberCheck):
            output[spec.path] = spec.value
        elif isinstance(spec, OneOfCheck):
            output[spec.path] = spec.values[0]
        elif isinstance(spec, IsNullCheck):
            output[spec.path] = None
    properties = contract.output_schema.get("properties", {})
    return {key: value for key, value in output.items() if key in properties}


WAIVER = {"rendering": "an oracle, not a model: there is no prompt rendering to inspect"}


class Oracle(Lifecycle):
    def __init__(self, contract: Contract) -> None:
        self._contract = contract

    @property
    def name(self) -> str:
        return "oracle"

    @property
    def fingerprint(self) -> str:
        return "oracle-1"

    async def complete(self, request: CompletionRequest) -> Completion:
        output = oracle_output(self._contract, request.labels["case"])
        return Completion(text=json.dumps(output), output=output)


@pytest.mark.parametrize("name", ["caption", "extract_product", "review_sentiment"])
async def test_an_answer_meeting_the_expectations_certifies(name: str) -> None:
    contract = load_contract(name)
    cert = await certify(
        Oracle(contract), contract, now=datetime(2025, 1, 1, tzinfo=UTC), accept_unverified=WAIVER
    )
    assert [c.failures for c in cert.cases if c.failures] == []
    assert cert.passed and cert.unverified_checks == ("rendering",)  # the oracle shows no prompt
    assert len(cert.cases) == len(contract.cases)


async def test_a_wrong_answer_fails_the_library_cases() -> None:
    contract = load_contract("extract_product")
    answer = {"name": "Something", "price": 1.0, "currency": "EUR"}

    class Wrong(Oracle):
        async def complete(self, request: CompletionRequest) -> Completion:
            return Completion(text=json.dumps(answer), output=answer)

    cert = await certify(Wrong(contract), contract, now=datetime(2025, 1, 1, tzinfo=UTC))
    assert not any(case.passed for case in cert.cases)
    no_price = next(case for case in cert.cases if case.name == "no_price")
    assert "behaviour: is_null: run 1/3: case expectation at price: found 1.0, expected null" in [
        str(f) for f in no_price.failures
    ]
