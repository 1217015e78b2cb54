"""Stability, measured (issue 32): per case, how many identical requests got different answers,
the agreement's margin, each run's finish reason; and the warnings a contract earns for free-text
agreement under min_agreement 1.0 and for answers cut off at max_tokens.

A scripted fake here (pure certification logic); tests/contracts/test_stability_recorded.py holds
the same against the real server's recorded answers."""

from __future__ import annotations

from typing import Any

import pytest

from jobrouter.contracts import Contract, certify, contract_from_data
from jobrouter.contracts.lint import contract_warnings, cut_off_answers, free_text_agreement
from jobrouter.providers.base import Completion, CompletionRequest
from jobrouter.providers.errors import InvalidOutput
from tests.contracts.test_contract_certify import (
    GOOD_ANSWERS,
    NEGATIVE,
    NOW,
    POSITIVE,
    Answer,
    FakeProvider,
)

MIXED = {"sentiment": "mixed", "reason": "unsure"}


class FinishingFake(FakeProvider):
    """The fake, with a finish reason per answer served (in turn, the last one repeating)."""

    def __init__(self, answers: dict[str, list[Answer]], finish: list[str]) -> None:
        super().__init__(answers)
        self._finish = finish
        self._calls = 0

    async def complete(self, request: CompletionRequest) -> Completion:
        reason = self._finish[min(self._calls, len(self._finish) - 1)]
        self._calls += 1
        completion = await super().complete(request)
        return completion.model_copy(update={"finish_reason": reason})


def _contract(data: dict[str, Any], **sampling: Any) -> Contract:
    data["cases"][0]["expect"] = []
    data["sampling"].update(sampling)
    return contract_from_data(data)


async def test_identical_requests_with_different_answers_are_counted(
    contract_data: dict[str, Any],
) -> None:
    """Five identical requests, two answers: two runs differ from the most common one. Mutant:
    `differing_runs` taken as distinct answers - 1 (1)."""
    contract = _contract(contract_data, repeats=5, min_agreement=0.5)
    script: list[Answer] = [POSITIVE, MIXED, POSITIVE, MIXED, POSITIVE]
    provider = FakeProvider({**GOOD_ANSWERS, "Great mug": script})
    case = (await certify(provider, contract, now=NOW)).cases[0]
    assert case.distinct_answers == 2
    assert case.differing_runs == 2
    assert case.agreement == pytest.approx(3 / 5)  # agree_on [sentiment]: 3 positive
    assert case.agreement_margin == pytest.approx(0.1)


async def test_a_pass_at_exactly_min_agreement_has_a_zero_margin(
    contract_data: dict[str, Any],
) -> None:
    """2 of 3 at 0.67 passes (whole percent): its margin is 0, not negative. Mutant: the margin
    as share - min_agreement unrounded (-0.0033)."""
    contract = _contract(contract_data)
    provider = FakeProvider({**GOOD_ANSWERS, "Great mug": [POSITIVE, MIXED, POSITIVE]})
    case = (await certify(provider, contract, now=NOW)).cases[0]
    assert case.passed
    assert case.agreement_margin == 0.0
    assert (case.distinct_answers, case.differing_runs) == (2, 1)


async def test_identical_answers_differ_in_nothing(contract: Contract) -> None:
    """Mutant: distinct answers counted over the runs rather than over their texts (3)."""
    cert = await certify(FakeProvider(GOOD_ANSWERS), contract, now=NOW)
    assert [(c.distinct_answers, c.differing_runs) for c in cert.cases] == [(1, 0), (1, 0)]
    assert [c.agreement_margin for c in cert.cases] == [pytest.approx(0.33)] * 2


async def test_runs_without_an_answer_are_not_counted_as_different(
    contract_data: dict[str, Any],
) -> None:
    """A run the provider never answered is no answer that differs. Mutant: an error counted as
    a distinct (None) answer (distinct 2, differing 1)."""
    contract = _contract(contract_data)
    refused = InvalidOutput("x", provider="fake", check="json", text="{")
    provider = FakeProvider({**GOOD_ANSWERS, "Great mug": [POSITIVE, POSITIVE, refused]})
    case = (await certify(provider, contract, now=NOW)).cases[0]
    assert (case.distinct_answers, case.differing_runs) == (2, 1)  # "{" is an answer, unusable
    from jobrouter.providers.errors import Rejected

    provider = FakeProvider(
        {**GOOD_ANSWERS, "Great mug": [POSITIVE, POSITIVE, Rejected("no", provider="fake")]}
    )
    case = (await certify(provider, contract, now=NOW)).cases[0]
    assert (case.distinct_answers, case.differing_runs) == (1, 0)
    assert case.finish_reasons == (None, None, None)


async def test_each_runs_finish_reason_is_recorded(contract: Contract) -> None:
    """Mutant: the certifier drops `Completion.finish_reason` (the record says nothing)."""
    provider = FinishingFake(GOOD_ANSWERS, ["stop", "length", "stop"])
    cert = await certify(provider, contract, now=NOW)
    assert cert.cases[0].finish_reasons == ("stop", "length", "stop")
    assert cert.cases[0].cut_off_runs == 1
    assert cert.cases[1].finish_reasons == ("stop", "stop", "stop")


async def test_a_json_cut_off_at_max_tokens_says_so(contract: Contract) -> None:
    """Both ways an answer cut off arrives: raw text the certifier parses, and an answer the
    adapter refused (`InvalidOutput` carries the finish reason). Mutant: `_cut_off` ignores the
    finish reason (the detail reads like any invalid JSON)."""
    cut = '{"sentiment": "posi'
    refused = InvalidOutput(
        "answer is not valid JSON", provider="fake", check="json", text=cut, finish_reason="length"
    )
    provider = FinishingFake({"Great mug": [cut], "Broke": [refused]}, ["length"])
    cert = await certify(provider, contract, now=NOW)
    for case in cert.cases:
        json_failures = [f for f in case.failures if f.check == "json"]
        assert json_failures and all(
            f.detail.startswith("cut off at max_tokens (finish reason length): ")
            for f in json_failures
        ), json_failures
        assert case.finish_reasons == ("length",) * 3
    provider = FinishingFake({"Great mug": [cut], "Broke": [NEGATIVE]}, ["stop"])
    case = (await certify(provider, contract, now=NOW)).cases[0]
    assert not any(f.detail.startswith("cut off") for f in case.failures)


# --- warnings ----------------------------------------------------------------------------------


def _free_text_contract(data: dict[str, Any], **sampling: Any) -> Contract:
    properties = data["output_schema"]["properties"]
    properties["reason"] = {"type": "string", "maxLength": 300}
    properties["sentiment"] = {"type": "string", "enum": ["positive", "negative", "mixed"]}
    return _contract(data, **sampling)


def test_agreement_on_free_text_under_full_agreement_warns(contract_data: dict[str, Any]) -> None:
    """Mutant: the free-text test never looks at the agree_on path's schema (no warning)."""
    contract = _free_text_contract(contract_data, min_agreement=1.0, agree_on=["reason"])
    (warning,) = free_text_agreement(contract)
    assert warning.field == "sampling.agree_on"
    assert "min_agreement 1.0 over 3 runs on free text [reason]" in warning.found
    assert "lower sampling.min_agreement" in warning.fix
    assert str(warning).startswith("warning: contract sentiment, sampling.agree_on: ")


@pytest.mark.parametrize(
    ("sampling", "why"),
    [
        ({"min_agreement": 0.67, "agree_on": ["reason"]}, "not every run must agree"),
        ({"min_agreement": 1.0, "agree_on": ["sentiment"]}, "an enum is no free text"),
        ({"min_agreement": 1.0, "repeats": 1, "agree_on": ["reason"]}, "one run: no other"),
    ],
)
def test_no_warning_where_agreement_cannot_hinge_on_wording(
    contract_data: dict[str, Any], sampling: dict[str, Any], why: str
) -> None:
    """Mutants: the threshold test dropped (warns at 0.67), `enum` not closing a string, the
    repeats test dropped."""
    contract = _free_text_contract(contract_data, **sampling)
    assert free_text_agreement(contract) == [], why


def test_an_empty_agree_on_is_the_whole_output(contract_data: dict[str, Any]) -> None:
    """The whole output agrees only if its free text does. Mutant: `$` resolved to no schema."""
    contract = _free_text_contract(contract_data, min_agreement=1.0, agree_on=[])
    (warning,) = free_text_agreement(contract)
    assert warning.field == "sampling.agree_on (empty: the output)"
    pattern = {"type": "string", "pattern": "^[a-z]+$"}
    contract_data["output_schema"]["properties"]["reason"] = pattern
    assert free_text_agreement(_contract(contract_data, min_agreement=1.0, agree_on=[])) == []


async def test_answers_cut_off_at_max_tokens_warn_with_the_field(contract: Contract) -> None:
    """Mutant: `cut_off_answers` counts runs, not runs whose finish reason is length."""
    provider = FinishingFake(GOOD_ANSWERS, ["length", "stop"])
    cert = await certify(provider, contract, now=NOW)
    warning = cut_off_answers(contract, cert)
    assert warning is not None
    assert (warning.field, warning.provider) == ("sampling.max_tokens", "fake")
    assert "1 of 6 runs were cut off at max_tokens 50" in warning.found
    assert "cases good 1/3" in warning.found
    assert "raise sampling.max_tokens above 50" in warning.fix
    assert contract_warnings(contract, [cert]) == [warning]
    clean = await certify(FinishingFake(GOOD_ANSWERS, ["stop"]), contract, now=NOW)
    assert cut_off_answers(contract, clean) is None
    assert contract_warnings(contract, [clean]) == []
