"""The rendering check against ground truth: the prompt tokens the provider reports.

Every test here fails on the code before issue 13: there the provider's `usage.prompt_tokens`
was never compared with the product's count, a check that could not be performed (None) passed,
and a provider that cannot be inspected passed rendering silently.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jobrouter.contracts import Contract, certify
from jobrouter.contracts.rendering import NO_USAGE, diagnose, tolerance
from jobrouter.providers.base import MarkerTokens
from jobrouter.providers.errors import InvalidOutput
from tests.contracts.test_contract_certify import (
    GOOD_ANSWERS,
    USAGE,
    WAIVER,
    Answer,
    BareFake,
    InspectableFake,
    inspection,
)

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SYSTEM_TOKENS = 12  # inspection(): the prompt without its system text counts USAGE - 12


async def test_the_system_text_dropped_by_the_provider_fails_rendering(contract: Contract) -> None:
    """The issue's gemma server treated as hosted: the product meant 40 tokens, the server
    counted the prompt without the system text."""
    provider = InspectableFake(GOOD_ANSWERS, usage=USAGE - SYSTEM_TOKENS)
    cert = await certify(provider, contract, now=NOW)
    case = cert.cases[0]
    assert (cert.passed, case.verdict, case.failed_checks) == (False, "fail", ("rendering",))
    assert str(case.failures[0]) == (
        "rendering: run 1/3: the provider counted 28 prompt tokens, the product 40 "
        "(llama.cpp /tokenize, exact, tolerance 2): system text dropped: 28 is the count of "
        "the prompt without it (28)"
    )
    assert case.rendering.diagnosis is not None
    assert case.rendering.diagnosis.startswith("system text dropped")
    assert case.rendering.reported_prompt_tokens == (28, 28, 28)
    assert (case.rendering.prompt_tokens, case.rendering.verdict) == (USAGE, "fail")


async def test_more_tokens_than_meant_names_split_markers_or_a_template(contract: Contract) -> None:
    """The issue's llama-2 server: the product counted 90, the server 109."""
    split = inspection(
        prompt_tokens=90,
        prompt_tokens_without_system=70,
        markers=(MarkerTokens(marker="[INST]", token_ids=(236840, 34177, 236842), special=False),),
    )
    cert = await certify(InspectableFake(GOOD_ANSWERS, split, usage=109), contract, now=NOW)
    details = [str(f) for f in cert.cases[0].failures]
    assert "the provider counted 109 prompt tokens, the product 90" in details[1]
    assert details[1].endswith("19 tokens more than meant: control markers split into plain tokens")
    assert "'[INST]' -> [236840, 34177, 236842]" in details[0]
    plain = inspection(prompt_tokens=90, prompt_tokens_without_system=70)
    cert = await certify(InspectableFake(GOOD_ANSWERS, plain, usage=109), contract, now=NOW)
    assert cert.cases[0].rendering.diagnosis == (
        "19 tokens more than meant: a template added, or markers split into plain tokens"
    )


async def test_counts_within_the_tolerance_pass(contract: Contract) -> None:
    near = InspectableFake(GOOD_ANSWERS, usage=USAGE + 2)
    assert (await certify(near, contract, now=NOW)).passed
    beyond = InspectableFake(GOOD_ANSWERS, usage=USAGE + 3)
    assert not (await certify(beyond, contract, now=NOW)).passed


async def test_no_usage_reported_is_unverified_and_blocks_without_a_waiver(
    contract: Contract,
) -> None:
    text_only: dict[str, list[Answer]] = {
        "Great mug": ['{"sentiment": "positive", "reason": "likes it"}'],
        "Broke": ['{"sentiment": "negative", "reason": "it broke"}'],
    }
    cert = await certify(InspectableFake(text_only), contract, now=NOW)
    case = cert.cases[0]
    assert (cert.passed, cert.verdict, case.verdict, case.failures) == (
        False,
        "unverified",
        "unverified",
        (),
    )
    assert case.rendering.unverified == (NO_USAGE,)
    assert case.rendering.reported_prompt_tokens == (None, None, None)
    valid, reason = cert.is_valid_for(cert.contract_fingerprint, "fake-v1", NOW)
    assert not valid and reason.startswith(
        "unverified: good: unverified rendering: the provider reported no usage"
    )


async def test_an_uninspectable_provider_is_unverified_unless_waived(contract: Contract) -> None:
    cert = await certify(BareFake(GOOD_ANSWERS), contract, now=NOW)
    assert (cert.passed, cert.verdict, cert.unverified_checks) == (
        False,
        "unverified",
        ("rendering",),
    )
    assert cert.cases[0].rendering.unverified[0].startswith("prompt inspection unavailable")
    assert cert.cases[0].rendering.reported_prompt_tokens == (USAGE,) * 3  # kept as evidence
    waived = await certify(BareFake(GOOD_ANSWERS), contract, now=NOW, accept_unverified=WAIVER)
    assert (waived.passed, waived.verdict, waived.waivers) == (True, "unverified", WAIVER)
    assert waived.cases[0].rendering.waived == WAIVER["rendering"]
    valid, reason = waived.is_valid_for(waived.contract_fingerprint, "fake-v1", NOW)
    assert valid and reason.endswith(f"; waived: rendering unverified ({WAIVER['rendering']})")


async def test_a_waiver_never_excuses_a_failure(contract: Contract) -> None:
    dropped = InspectableFake(GOOD_ANSWERS, usage=USAGE - SYSTEM_TOKENS)
    cert = await certify(dropped, contract, now=NOW, accept_unverified=WAIVER)
    assert not cert.passed and cert.verdict == "fail"


async def test_an_estimate_cannot_show_a_short_system_text_arrived(contract: Contract) -> None:
    """Hosted: litellm's estimate with a wide tolerance; a system text shorter than the
    tolerance could be dropped unseen, so it is unverified, not passed."""
    estimate = inspection(
        count_basis="estimate",
        rendered=None,
        markers=(),
        control_tokens_special=None,
        prompt_tokens=40,
        prompt_tokens_without_system=35,
    )
    cert = await certify(InspectableFake(GOOD_ANSWERS, estimate, usage=36), contract, now=NOW)
    rendering = cert.cases[0].rendering
    assert (cert.verdict, rendering.tolerance) == ("unverified", 8)
    assert rendering.unverified[0].startswith(
        "the system text is 5 tokens, within the estimate's tolerance of 8"
    )
    long_system = estimate.model_copy(update={"prompt_tokens_without_system": 20})
    cert = await certify(InspectableFake(GOOD_ANSWERS, long_system, usage=40), contract, now=NOW)
    assert cert.passed and cert.verdict == "pass"
    cert = await certify(InspectableFake(GOOD_ANSWERS, long_system, usage=21), contract, now=NOW)
    assert cert.cases[0].rendering.diagnosis == (
        "system text dropped: 21 is the count of the prompt without it (20)"
    )


async def test_an_unreproduced_format_is_unverified_and_a_short_count_still_fails(
    contract: Contract,
) -> None:
    bare: dict[str, Any] = {
        "count_basis": "lower_bound",
        "rendered": None,
        "markers": (),
        "control_tokens_special": None,
        "system_rendered": None,
        "prompt_tokens_without_system": None,
        "unverified": ("chat format 'x' is not reproduced here",),
    }
    unknown = inspection(**bare)
    cert = await certify(InspectableFake(GOOD_ANSWERS, unknown, usage=90), contract, now=NOW)
    assert (cert.verdict, cert.cases[0].failures) == ("unverified", ())
    cert = await certify(InspectableFake(GOOD_ANSWERS, unknown, usage=20), contract, now=NOW)
    assert cert.verdict == "fail"
    assert cert.cases[0].rendering.diagnosis == "20 tokens fewer than meant: text dropped or cut"


async def test_the_adapters_own_validation_names_json_or_schema(contract: Contract) -> None:
    """Before, an answer the adapter rejected read "provider error (rejected): ..." and the
    matrix never showed "schema" or "json"; the run's usage was lost too."""
    not_json = InvalidOutput(
        "answer is not valid JSON (Expecting value at line 1 column 1)",
        provider="fake",
        check="json",
        text="It is negative.",
        prompt_tokens=USAGE,
    )
    off_schema = InvalidOutput(
        "answer does not match the output schema at $.sentiment",
        provider="fake",
        check="schema",
        text='{"sentiment": "awful"}',
        prompt_tokens=USAGE,
    )
    answers: dict[str, list[Answer]] = {"Great mug": [not_json], "Broke": [off_schema]}
    cert = await certify(InspectableFake(answers), contract, now=NOW)
    good, bad = cert.cases
    assert good.failed_checks == ("json", "agreement")
    assert bad.failed_checks == ("schema", "agreement")
    assert bad.outputs == ({"sentiment": "awful"},) * 3
    assert good.rendering.reported_prompt_tokens == (USAGE,) * 3
    assert good.rendering.verdict == "pass"
    assert cert.failed_checks == ("json", "agreement", "schema")


async def test_a_fenced_answer_that_breaks_the_schema_keeps_its_text(contract: Contract) -> None:
    """The adapter unwrapped a fenced answer and found it off the schema: its text, not JSON
    as it stands, is kept as the run's output, and the case fails on "schema".
    Mutant: certify `_invalid`'s `except json.JSONDecodeError` re-raising (the certification
    itself raised, no verdict at all), seen failing."""
    fenced = '```json\n{"sentiment": "awful"}\n```'
    off_schema = InvalidOutput(
        "answer does not match the output schema at $.sentiment",
        provider="fake",
        check="schema",
        text=fenced,
        prompt_tokens=USAGE,
    )
    answers: dict[str, list[Answer]] = {**GOOD_ANSWERS, "Broke": [off_schema]}
    cert = await certify(InspectableFake(answers), contract, now=NOW)
    bad = cert.cases[1]
    assert bad.failed_checks == ("schema", "agreement")
    assert bad.outputs == (fenced,) * 3


def test_tolerances_and_diagnoses_are_what_the_docs_say() -> None:
    assert tolerance("exact", 1000) == 2
    assert (tolerance("estimate", 20), tolerance("estimate", 200)) == (8, 30)
    assert diagnose(73, 25, 28, 11, split_markers=False).startswith("system text dropped")
    assert diagnose(73, None, 28, 11, split_markers=False) == (
        "45 tokens fewer than meant: text dropped or cut"
    )


class Drifting(InspectableFake):
    """Reports the given prompt count for each run in turn (per case)."""

    def __init__(self, counts: list[int]) -> None:
        super().__init__(GOOD_ANSWERS)
        self._counts, self._calls = counts, 0

    async def complete(self, request: Any) -> Any:
        completion = await super().complete(request)
        count = self._counts[self._calls % len(self._counts)]
        self._calls += 1
        return completion.model_copy(
            update={"usage": completion.usage.model_copy(update={"prompt_tokens": count})}
        )


async def test_every_run_is_compared_not_only_the_first(contract: Contract) -> None:
    """A provider that counts right once and then drops the system text fails at that run."""
    cert = await certify(
        Drifting([USAGE, USAGE - SYSTEM_TOKENS, USAGE - SYSTEM_TOKENS]), contract, now=NOW
    )
    case = cert.cases[0]
    assert (cert.passed, case.failed_checks) == (False, ("rendering",))
    assert case.failures[0].run == "2/3"
    assert case.rendering.reported_prompt_tokens == (
        USAGE,
        USAGE - SYSTEM_TOKENS,
        USAGE - SYSTEM_TOKENS,
    )


def test_system_text_dropped_is_said_only_when_the_counts_show_it() -> None:
    # far from the count without the system text: not "system text dropped"
    assert diagnose(73, 25, 60, 11, split_markers=False) == (
        "13 tokens fewer than meant: text dropped or cut"
    )
    # a system text within the tolerance cannot be told apart from other lost text
    assert diagnose(40, 35, 30, 8, split_markers=False) == (
        "10 tokens fewer than meant: text dropped or cut"
    )
