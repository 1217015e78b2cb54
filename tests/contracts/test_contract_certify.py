"""Certification against a scripted fake provider: verdicts, evidence, validity, JSON round trip.

The fake is fine here: this is pure certification logic. Real providers are certified from
cassettes elsewhere.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobrouter.contracts import (
    Certification,
    Contract,
    certify,
    contract_fingerprint,
    contract_from_data,
)
from jobrouter.contracts.certification import Failure, Validity
from jobrouter.contracts.rendering import NO_USAGE, UNKNOWN_WINDOW
from jobrouter.providers.base import (
    Completion,
    CompletionRequest,
    MarkerTokens,
    Message,
    PromptInspection,
    Usage,
)
from jobrouter.providers.errors import NotSent, OutcomeUnknown, ProviderError, Rejected
from tests.support.fakes import Lifecycle

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
Answer = dict[str, Any] | str | ProviderError

POSITIVE = {"sentiment": "positive", "reason": "likes the mug"}
NEGATIVE = {"sentiment": "negative", "reason": "it broke"}
GOOD_ANSWERS: dict[str, list[Answer]] = {"Great mug": [POSITIVE], "Broke": [NEGATIVE]}


class BareFake(Lifecycle):
    """Answers by the review text in the user message: a script of answers used in turn.

    A dict is a parsed output (reported usage: `USAGE` prompt tokens), a str is raw text the
    provider did not parse (no usage), a `ProviderError` is raised. The last answer of a script
    repeats. It cannot show how it receives a prompt (a hosted API without inspection).
    """

    def __init__(
        self,
        answers: dict[str, list[Answer]],
        *,
        fingerprint: str = "fake-v1",
        usage: int | None = None,
    ) -> None:
        self._answers = answers
        self._fingerprint = fingerprint
        self._usage = USAGE if usage is None else usage
        self._served: dict[str, int] = {}
        self.requests: list[CompletionRequest] = []

    @property
    def name(self) -> str:
        return "fake"

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    async def complete(self, request: CompletionRequest) -> Completion:
        self.requests.append(request)
        user = request.messages[-1].content
        key = next(k for k in self._answers if k in user)
        served = self._served.get(key, 0)
        self._served[key] = served + 1
        script = self._answers[key]
        answer = script[min(served, len(script) - 1)]
        if isinstance(answer, ProviderError):
            raise answer
        if isinstance(answer, str):
            return Completion(text=answer)
        return Completion(
            text=json.dumps(answer), output=answer, usage=Usage(prompt_tokens=self._usage)
        )


class InspectableFake(BareFake):
    """A fake that also reports how it receives the prompt (default: `inspection()`, whose
    count agrees with the usage the fake reports)."""

    def __init__(
        self,
        answers: dict[str, list[Answer]],
        shown: PromptInspection | ProviderError | None = None,
        *,
        usage: int | None = None,
    ) -> None:
        super().__init__(answers, usage=usage)
        self._inspection = shown if shown is not None else inspection()
        self.inspected: list[tuple[Message, ...]] = []

    async def inspect_prompt(
        self, messages: tuple[Message, ...], output_schema: dict[str, Any] | None = None
    ) -> PromptInspection:
        self.inspected.append(messages)
        if isinstance(self._inspection, ProviderError):
            raise self._inspection
        return self._inspection


FakeProvider = InspectableFake
USAGE = 40
WAIVER = {"rendering": "test fake: nothing to inspect; accepted in this test"}


def inspection(**changes: Any) -> PromptInspection:
    fields: dict[str, Any] = {
        "accepted_roles": frozenset({"system", "user", "assistant"}),
        "rendered": "<start_of_turn>user\n...",
        "system_rendered": True,
        "prompt_tokens": USAGE,
        "prompt_tokens_without_system": USAGE - 12,
        "tokenizer": "llama.cpp /tokenize",
        "context_window": 2048,
        "control_tokens_special": True,
        "markers": (MarkerTokens(marker="<start_of_turn>", token_ids=(105,), special=True),),
    }
    return PromptInspection(**(fields | changes))


async def test_passing_provider_is_certified_with_evidence(contract: Contract) -> None:
    provider = FakeProvider(GOOD_ANSWERS)
    progress: list[tuple[str, int, int]] = []
    cert = await certify(provider, contract, now=NOW, progress=lambda *a: progress.append(a))
    assert cert.passed
    assert (cert.provider, cert.provider_fingerprint) == ("fake", "fake-v1")
    assert (cert.contract, cert.contract_version) == ("sentiment", 1)
    assert cert.contract_fingerprint == contract_fingerprint(contract)
    assert (cert.certified_at, cert.expires_at) == (NOW, NOW + timedelta(days=7))
    assert [case.name for case in cert.cases] == ["good", "bad"]
    good = cert.cases[0]
    assert (good.passed, good.runs, good.agreement, good.failures) == (True, 3, 1.0, ())
    assert (good.verdict, good.rendering.verdict, good.unverified) == ("pass", "pass", ())
    assert good.outputs == (POSITIVE, POSITIVE, POSITIVE)
    assert good.rendering.inspected
    assert (good.rendering.prompt_tokens, good.rendering.reported_prompt_tokens) == (
        USAGE,
        (USAGE,) * 3,
    )
    assert progress == [(name, run, 3) for name in ("good", "bad") for run in (1, 2, 3)]
    assert len(provider.requests) == 6
    assert provider.requests[0].labels["case"] == "good"
    assert provider.requests[0].temperature == 0.0
    assert cert.is_valid_for(cert.contract_fingerprint, "fake-v1", NOW) == (
        True,
        "valid until 2025-03-08T12:00:00+00:00",
    )


async def test_schema_violation_fails_with_evidence_naming_the_case(contract: Contract) -> None:
    provider = FakeProvider({**GOOD_ANSWERS, "Broke": [{"sentiment": "awful", "reason": "x"}]})
    cert = await certify(provider, contract, now=NOW)
    assert not cert.passed
    good, bad = cert.cases
    assert good.passed and not bad.passed
    assert bad.failures[0] == Failure(
        check="schema",
        run="1/3",
        detail="sentiment: 'awful' is not one of ['positive', 'negative', 'mixed']",
    )
    assert str(bad.failures[-1]).startswith(
        "agreement: all 3 runs identical but invalid (schema): no usable output to agree on"
    )
    assert bad.failed_checks == ("schema", "agreement") == cert.failed_checks
    assert bad.verdict == "fail"
    assert bad.outputs == ({"sentiment": "awful", "reason": "x"},) * 3
    assert cert.first_failure == f"bad: {bad.failures[0]}"
    valid, reason = cert.is_valid_for(cert.contract_fingerprint, "fake-v1", NOW)
    assert (valid, reason) == (False, f"failed: bad: {bad.failures[0]}")


async def test_wrong_expectation_and_failed_check_are_reported(contract: Contract) -> None:
    long_reason = {"sentiment": "positive", "reason": "x" * 41}
    provider = FakeProvider({"Great mug": [POSITIVE], "Broke": [long_reason]})
    cert = await certify(provider, contract, now=NOW)
    bad = cert.cases[1]
    assert [str(f) for f in bad.failures[:2]] == [
        'behaviour: max_length: run 1/3: contract check at reason: found "'
        + "x" * 41
        + '" (length 41), expected a string or list of length <= 40',
        'behaviour: equals: run 1/3: case expectation at sentiment: found "positive", '
        'expected "negative"',
    ]
    assert bad.failed_checks == ("behaviour: max_length", "behaviour: equals")
    assert bad.agreement == 1.0  # consistent, but consistently wrong


async def test_disagreeing_repeats_fail_agreement(contract_data: dict[str, Any]) -> None:
    contract_data["cases"][0]["expect"] = []
    contract_data["sampling"]["min_agreement"] = 1.0
    contract = contract_from_data(contract_data)
    mixed = {"sentiment": "mixed", "reason": "unsure"}
    provider = FakeProvider({**GOOD_ANSWERS, "Great mug": [POSITIVE, POSITIVE, mixed]})
    cert = await certify(provider, contract, now=NOW)
    good = cert.cases[0]
    assert not good.passed
    assert good.failures == (
        Failure(
            check="agreement",
            detail=(
                "2/3 runs agree on [sentiment]; runs disagree: 2 different answers "
                "(share 0.67 < min_agreement 1.0)"
            ),
        ),
    )
    assert good.agreement == pytest.approx(2 / 3)
    assert cert.cases[1].passed and not cert.passed


async def test_two_of_three_is_enough_at_the_default_threshold(
    contract_data: dict[str, Any],
) -> None:
    contract_data["cases"][0]["expect"] = []
    contract = contract_from_data(contract_data)
    mixed = {"sentiment": "mixed", "reason": "unsure"}
    provider = FakeProvider({**GOOD_ANSWERS, "Great mug": [POSITIVE, mixed, POSITIVE]})
    assert (await certify(provider, contract, now=NOW)).passed


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (Rejected("context length exceeded", provider="fake", status=400), "rejected"),
        (OutcomeUnknown("read timeout", provider="fake"), "unknown"),
        (NotSent("connection refused", provider="fake"), "not_sent"),
    ],
)
async def test_provider_error_fails_the_case_with_its_kind(
    contract: Contract, error: ProviderError, kind: str
) -> None:
    provider = FakeProvider({**GOOD_ANSWERS, "Broke": [error, NEGATIVE]})
    cert = await certify(provider, contract, now=NOW)
    bad = cert.cases[1]
    assert not bad.passed
    assert bad.failures == (Failure(check="provider", run="1/3", detail=f"{kind}: {error}"),)
    assert bad.outputs == (NEGATIVE, NEGATIVE)
    assert bad.agreement == pytest.approx(2 / 3)
    assert str(error).startswith("fake: ")


async def test_other_exceptions_are_bugs_and_propagate(contract: Contract) -> None:
    class Broken(FakeProvider):
        async def complete(self, request: CompletionRequest) -> Completion:
            raise RuntimeError("bug in adapter")

    with pytest.raises(RuntimeError, match="bug in adapter"):
        await certify(Broken(GOOD_ANSWERS), contract, now=NOW)


async def test_unparsed_text_is_parsed_and_non_json_fails(contract: Contract) -> None:
    provider = FakeProvider({"Great mug": [json.dumps(POSITIVE)], "Broke": ["It is negative."]})
    cert = await certify(provider, contract, now=NOW)
    good, bad = cert.cases
    assert good.outputs == (POSITIVE,) * 3 and good.failures == ()
    assert (good.verdict, good.passed) == ("unverified", False)  # text answers bring no usage
    assert str(bad.failures[0]).startswith(
        "json: run 1/3: output is not JSON: Expecting value in 'It is"
    )
    assert bad.outputs == ()
    # a raw-text answer carried no usage: the count could not be compared, and the record says so
    assert bad.rendering.reported_prompt_tokens == (None, None, None)
    assert bad.rendering.unverified == (NO_USAGE,)


@pytest.mark.parametrize(
    ("value", "why"),
    [(float("nan"), "Out of range float values"), ({"a", "b"}, "set is not JSON serializable")],
    ids=["nan", "set"],
)
async def test_an_output_json_cannot_hold_fails_on_json(
    contract: Contract, value: Any, why: str
) -> None:
    """An adapter's parsed output holding what JSON cannot (NaN, a set): the run fails its
    "json" check, the certification goes on.
    Mutant: certify `_parse`'s last `except` re-raising (a NaN failed with another message,
    a set's TypeError ended the whole certification), seen failing on both."""

    class Unrepresentable(FakeProvider):
        async def complete(self, request: CompletionRequest) -> Completion:
            if "Broke" not in request.messages[-1].content:
                return await super().complete(request)
            answer = {"sentiment": "negative", "reason": value}
            return Completion(text="(parsed)", output=answer, usage=Usage(prompt_tokens=USAGE))

    cert = await certify(Unrepresentable(GOOD_ANSWERS), contract, now=NOW)
    bad = cert.cases[1]
    assert str(bad.failures[0]).startswith("json: run 1/3: output is not JSON: not representable")
    assert why in str(bad.failures[0])


async def test_inspection_without_system_prompt_fails(contract: Contract) -> None:
    provider = InspectableFake(GOOD_ANSWERS, inspection(system_rendered=False))
    cert = await certify(provider, contract, now=NOW)
    assert not cert.passed
    for case in cert.cases:
        assert case.failures == (
            Failure(
                check="rendering",
                detail="the system prompt is not present in what the model receives",
            ),
        )
        assert case.rendering.inspected and case.rendering.system_rendered is False
        assert len(case.outputs) == 3  # the runs still happen: the outputs are evidence too
    assert len(provider.inspected) == 2
    assert provider.inspected[0][0] == Message(role="system", content=contract.prompt.system or "")


async def test_context_window_overflow_fails(contract: Contract) -> None:
    provider = InspectableFake(
        GOOD_ANSWERS, inspection(prompt_tokens=100, context_window=120), usage=100
    )
    cert = await certify(provider, contract, now=NOW)
    assert [str(f) for f in cert.cases[0].failures] == [
        "rendering: 100 prompt tokens + 50 max_tokens = 150 > context window 120",
    ]
    fits = InspectableFake(
        GOOD_ANSWERS, inspection(prompt_tokens=100, context_window=150), usage=100
    )
    assert (await certify(fits, contract, now=NOW)).passed


async def test_inspection_evidence_is_recorded_when_it_passes(contract: Contract) -> None:
    cert = await certify(InspectableFake(GOOD_ANSWERS, inspection()), contract, now=NOW)
    assert cert.passed
    rendering = cert.cases[0].rendering
    assert rendering.inspected and rendering.notes == ()
    assert (rendering.prompt_tokens, rendering.tokenizer) == (USAGE, "llama.cpp /tokenize")
    assert (rendering.count_basis, rendering.tolerance, rendering.diagnosis) == ("exact", 2, None)
    assert rendering.markers == inspection().markers
    assert rendering.accepted_roles == ("assistant", "system", "user")
    assert rendering.context_window == 2048
    assert rendering.messages[-1] == Message(role="user", content="Review: Great mug, love it.")


@pytest.mark.parametrize(
    ("changes", "failure"),
    [
        (
            {"accepted_roles": frozenset({"user", "assistant"})},
            "rendering: role 'system' is not accepted by the chat format (assistant, user)",
        ),
        (
            {
                "control_tokens_special": False,
                "markers": (
                    MarkerTokens(
                        marker="<|im_start|>", token_ids=(236820, 236909, 548), special=False
                    ),
                    MarkerTokens(marker="<s>", token_ids=(203,), special=False),
                ),
            },
            "rendering: the chat markers are not control tokens of the model's tokenizer (plain "
            "text to the model): '<|im_start|>' -> [236820, 236909, 548], '<s>' -> [203]",
        ),
    ],
)
async def test_chat_format_problems_fail(
    contract: Contract, changes: dict[str, Any], failure: str
) -> None:
    cert = await certify(InspectableFake(GOOD_ANSWERS, inspection(**changes)), contract, now=NOW)
    assert [str(f) for f in cert.cases[0].failures] == [failure]
    assert cert.cases[0].rendering.verdict == "fail"


async def test_no_markers_to_check_do_not_fail(contract: Contract) -> None:
    """A hosted chat API has no markers (roles are fields): not applicable is not unverified."""
    relaxed = inspection(control_tokens_special=None, markers=())
    cert = await certify(InspectableFake(GOOD_ANSWERS, relaxed, usage=USAGE), contract, now=NOW)
    assert cert.passed and cert.verdict == "pass"


async def test_unknown_context_window_is_unverified_not_passed(contract: Contract) -> None:
    """Every model has a window; not knowing it means the fit was not checked. The old code
    skipped the check and passed a 10**6-token prompt."""
    unknown = inspection(
        control_tokens_special=None, markers=(), context_window=None, prompt_tokens=10**6
    )
    cert = await certify(InspectableFake(GOOD_ANSWERS, unknown, usage=10**6), contract, now=NOW)
    case = cert.cases[0]
    assert (cert.passed, case.verdict, case.failures) == (False, "unverified", ())
    assert case.rendering.unverified == (
        UNKNOWN_WINDOW.format(tokens=10**6, max_tokens=contract.sampling.max_tokens),
    )


async def test_failed_inspection_is_unverified_not_passed(contract: Contract) -> None:
    down = InspectableFake(GOOD_ANSWERS, NotSent("tokenize endpoint down", provider="fake"))
    cert = await certify(down, contract, now=NOW)
    case = cert.cases[0]
    assert (case.verdict, case.passed, case.failures) == ("unverified", False, ())
    assert case.rendering.unverified == (
        "prompt inspection failed (not_sent): fake: not_sent: tokenize endpoint down",
    )
    valid, why = cert.is_valid_for(cert.contract_fingerprint, "fake-v1", NOW)
    assert valid is False  # kills mutant `Certification.is_valid_for` 20 (`return True, ...`)
    assert why.startswith("unverified: good: unverified rendering: prompt inspection failed")


async def test_render_error_fails_the_case_without_calling_the_provider(
    contract_data: dict[str, Any],
) -> None:
    del contract_data["input_schema"]
    contract_data["cases"][1]["input"] = {"text": "Broke on day one."}
    contract = contract_from_data(contract_data)
    provider = FakeProvider(GOOD_ANSWERS)
    progress: list[tuple[str, int, int]] = []
    cert = await certify(provider, contract, now=NOW, progress=lambda *a: progress.append(a))
    bad = cert.cases[1]
    assert not bad.passed and bad.runs == 0
    assert [str(f) for f in bad.failures] == [
        "rendering: the prompt template: contract sentiment: prompt.user: undefined variable "
        "'review' ('review' is undefined)",
    ]
    assert not bad.rendering.ok
    assert len(provider.requests) == 3  # only the good case ran
    assert progress[-1] == ("bad", 3, 3)


async def test_contract_without_cases_cannot_pass(contract: Contract) -> None:
    empty = contract.model_copy(update={"cases": ()})
    cert = await certify(FakeProvider(GOOD_ANSWERS), empty, now=NOW)
    assert not cert.passed
    assert cert.is_valid_for(cert.contract_fingerprint, "fake-v1", NOW) == (
        False,
        "failed: cases: contract has no cases: nothing was certified",
    )


async def test_is_valid_for_reasons(contract: Contract) -> None:
    cert = await certify(FakeProvider(GOOD_ANSWERS), contract, now=NOW, ttl=timedelta(hours=1))
    fp = cert.contract_fingerprint
    changed = contract_fingerprint(contract.model_copy(update={"version": 2}))
    assert cert.is_valid_for(changed, "fake-v1", NOW) == (False, "stale: contract changed")
    assert cert.is_valid_for(fp, "fake-v2", NOW) == (False, "stale: provider changed")
    later = NOW + timedelta(hours=1)
    assert cert.is_valid_for(fp, "fake-v1", later) == (
        False,
        "expired at 2025-03-01T13:00:00+00:00",
    )
    assert cert.is_valid_for(fp, "fake-v1", later - timedelta(seconds=1))[0] is True
    # the exact text (kills mutants `Certification.is_valid_for` 3 and 4)
    with pytest.raises(ValueError) as refused:
        cert.is_valid_for(fp, "fake-v1", datetime(2025, 3, 1))  # naive on purpose
    assert str(refused.value) == "now must be timezone-aware (e.g. datetime.now(UTC))"


async def test_validity_is_data_not_read_back_from_the_reason(contract: Contract) -> None:
    """The matrix's status comes with the reason (`validity_for`), never parsed out of it."""
    cert = await certify(FakeProvider(GOOD_ANSWERS), contract, now=NOW, ttl=timedelta(hours=1))
    fp = cert.contract_fingerprint
    changed = contract_fingerprint(contract.model_copy(update={"version": 2}))
    later = NOW + timedelta(hours=1)
    empty = await certify(
        FakeProvider(GOOD_ANSWERS), contract.model_copy(update={"cases": ()}), now=NOW
    )
    down = InspectableFake(GOOD_ANSWERS, NotSent("tokenize endpoint down", provider="fake"))
    unverified = await certify(down, contract, now=NOW)
    seen = {
        "contract changed": cert.validity_for(changed, "fake-v1", NOW),
        "provider changed": cert.validity_for(fp, "fake-v2", NOW),
        "expired": cert.validity_for(fp, "fake-v1", later),
        "valid": cert.validity_for(fp, "fake-v1", NOW),
        "no cases": empty.validity_for(empty.contract_fingerprint, "fake-v1", NOW),
        "inspection down": unverified.validity_for(unverified.contract_fingerprint, "fake-v1", NOW),
    }
    assert {what: validity for what, (validity, _) in seen.items()} == {
        "contract changed": Validity.STALE,
        "provider changed": Validity.STALE,
        "expired": Validity.EXPIRED,
        "valid": Validity.PASS,
        "no cases": Validity.FAIL,
        "inspection down": Validity.UNVERIFIED,
    }
    assert [validity.valid for validity, _ in seen.values()] == [
        False,
        False,
        False,
        True,
        False,
        False,
    ]
    assert {v for v in Validity if v.outdated} == {
        Validity.STALE,
        Validity.EXPIRED,
        Validity.MISSING,
    }
    # suspended: a record's own validity is never that; the live watch's is (router/watch.py)
    assert not Validity.SUSPENDED.valid and not Validity.SUSPENDED.outdated
    assert {v.value for v in Validity} == {
        "suspended",
        "pass",
        "fail",
        "unverified",
        "stale",
        "expired",
        "missing",
    }


async def test_a_failed_record_without_evidence_says_so(contract: Contract) -> None:
    """A record that did not pass and names no failure is still refused, with a reason (kills
    the is_valid_for mutants that change the fallback reason)."""
    cert = await certify(FakeProvider(GOOD_ANSWERS), contract, now=NOW)
    bare = cert.model_copy(update={"passed": False, "cases": (), "failures": ()})
    assert bare.is_valid_for(bare.contract_fingerprint, "fake-v1", NOW) == (
        False,
        "failed: no passing evidence",
    )


async def test_an_unverified_record_without_evidence_says_so(contract: Contract) -> None:
    """A record whose verdict is unverified but that names nothing unverified (hand-edited, or
    written inconsistently) is refused, with the fallback reason. Kills mutants
    `Certification.is_valid_for` 20, 22 and 23."""
    cert = await certify(FakeProvider(GOOD_ANSWERS), contract, now=NOW)
    case = cert.cases[0].model_copy(update={"verdict": "unverified", "passed": True})
    odd = cert.model_copy(update={"passed": False, "cases": (case,), "failures": ()})
    assert odd.is_valid_for(odd.contract_fingerprint, "fake-v1", NOW) == (
        False,
        "unverified: not verified",
    )


async def test_a_valid_record_names_the_waivers_it_relies_on(contract: Contract) -> None:
    """Only the waivers of checks left unverified are named, each in its own clause. Kills
    mutants `Certification.is_valid_for` 30 (the clauses' separator) and 31 (the waivers of
    checks that were verified named instead)."""
    cert = await certify(FakeProvider(GOOD_ANSWERS), contract, now=NOW, ttl=timedelta(hours=1))
    case = cert.cases[0].model_copy(
        update={"verdict": "unverified", "unverified": ("rendering", "agreement")}
    )
    waivers = {"json": "not needed", "rendering": "a constant answer", "agreement": "one run"}
    waived = cert.model_copy(update={"cases": (case,), "waivers": waivers})
    assert waived.is_valid_for(waived.contract_fingerprint, "fake-v1", NOW) == (
        True,
        "valid until 2025-03-01T13:00:00+00:00; waived: rendering unverified (a constant "
        "answer); waived: agreement unverified (one run)",
    )


async def test_naive_now_is_refused(contract: Contract) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        await certify(FakeProvider(GOOD_ANSWERS), contract, now=datetime(2025, 3, 1))


async def test_json_round_trip_is_exact_and_replay_is_identical(contract: Contract) -> None:
    answers: dict[str, list[Answer]] = {
        "Great mug": [POSITIVE, {"sentiment": "mixed", "reason": "ünïcødé 😍", "x": 1.1}],
        "Broke": [Rejected("bad request", provider="fake", status=400), "not json", NEGATIVE],
    }
    live = await certify(InspectableFake(answers, inspection()), contract, now=NOW)
    replay = await certify(InspectableFake(answers, inspection()), contract, now=NOW)
    assert not live.passed and live.cases[0].agreement == pytest.approx(2 / 3)
    text = live.model_dump_json()
    restored = Certification.model_validate_json(text)
    assert restored == live
    assert restored.model_dump_json() == text
    assert replay.model_dump_json() == text


async def test_default_now_is_current_utc(contract: Contract) -> None:
    before = datetime.now(UTC)
    cert = await certify(FakeProvider(GOOD_ANSWERS), contract)
    assert before <= cert.certified_at <= datetime.now(UTC)
    assert cert.expires_at - cert.certified_at == timedelta(days=7)
