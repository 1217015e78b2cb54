"""Certification against a scripted fake provider: verdicts, evidence, validity, JSON round trip.

The fake is fine here: this is pure certification logic. Real providers are certified from
cassettes elsewhere.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from contracts import Certification, Contract, certify, contract_fingerprint, contract_from_data
from contracts.certify import INSPECTION_UNAVAILABLE
from providers.base import Completion, CompletionRequest, Message, PromptInspection, Usage
from providers.errors import NotSent, OutcomeUnknown, ProviderError, Rejected

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
Answer = dict[str, Any] | str | ProviderError

POSITIVE = {"sentiment": "positive", "reason": "likes the mug"}
NEGATIVE = {"sentiment": "negative", "reason": "it broke"}
GOOD_ANSWERS: dict[str, list[Answer]] = {"Great mug": [POSITIVE], "Broke": [NEGATIVE]}


class FakeProvider:
    """Answers by the review text in the user message: a script of answers used in turn.

    A dict is a parsed output, a str is raw text the provider did not parse, a `ProviderError`
    is raised. The last answer of a script repeats.
    """

    def __init__(self, answers: dict[str, list[Answer]], *, fingerprint: str = "fake-v1") -> None:
        self._answers = answers
        self._fingerprint = fingerprint
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
        return Completion(text=json.dumps(answer), output=answer, usage=Usage(prompt_tokens=17))


class InspectableFake(FakeProvider):
    """A fake that also reports how it receives the prompt."""

    def __init__(
        self, answers: dict[str, list[Answer]], inspection: PromptInspection | ProviderError
    ) -> None:
        super().__init__(answers)
        self._inspection = inspection
        self.inspected: list[tuple[Message, ...]] = []

    async def inspect_prompt(self, messages: tuple[Message, ...]) -> PromptInspection:
        self.inspected.append(messages)
        if isinstance(self._inspection, ProviderError):
            raise self._inspection
        return self._inspection


def inspection(**changes: Any) -> PromptInspection:
    fields: dict[str, Any] = {
        "accepted_roles": frozenset({"system", "user", "assistant"}),
        "rendered": "<start_of_turn>user\n...",
        "system_present": True,
        "prompt_tokens": 40,
        "tokenizer": "llama.cpp /tokenize",
        "context_window": 2048,
        "control_tokens_special": True,
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
    assert good.outputs == (POSITIVE, POSITIVE, POSITIVE)
    assert good.rendering.notes == (INSPECTION_UNAVAILABLE,)
    assert not good.rendering.inspected
    assert (good.rendering.prompt_tokens, good.rendering.tokenizer) == (17, "provider usage, run 1")
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
    assert (
        bad.failures[0] == "run 1/3: schema: sentiment: 'awful' is not one of "
        "['positive', 'negative', 'mixed']"
    )
    assert bad.failures[-1].startswith("agreement: 0/3 runs agree on [sentiment]")
    assert bad.outputs == ({"sentiment": "awful", "reason": "x"},) * 3
    assert cert.first_failure == f"bad: {bad.failures[0]}"
    valid, reason = cert.is_valid_for(cert.contract_fingerprint, "fake-v1", NOW)
    assert (valid, reason) == (False, f"failed: bad: {bad.failures[0]}")


async def test_wrong_expectation_and_failed_check_are_reported(contract: Contract) -> None:
    long_reason = {"sentiment": "positive", "reason": "x" * 41}
    provider = FakeProvider({"Great mug": [POSITIVE], "Broke": [long_reason]})
    cert = await certify(provider, contract, now=NOW)
    bad = cert.cases[1]
    assert bad.failures[:2] == (
        'run 1/3: check max_length at reason: found "' + "x" * 41 + '" (length 41), '
        "expected a string or list of length <= 40",
        'run 1/3: expect equals at sentiment: found "positive", expected "negative"',
    )
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
        "agreement: 2/3 runs agree on [sentiment] (share 0.67 < min_agreement 1.0)",
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
    assert bad.failures == (f"run 1/3: provider error ({kind}): {error}",)
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
    assert good.passed and good.outputs == (POSITIVE,) * 3
    assert bad.failures[0].startswith("run 1/3: output is not JSON: Expecting value in 'It is")
    assert bad.outputs == ()


async def test_inspection_without_system_prompt_fails(contract: Contract) -> None:
    provider = InspectableFake(GOOD_ANSWERS, inspection(system_present=False))
    cert = await certify(provider, contract, now=NOW)
    assert not cert.passed
    for case in cert.cases:
        assert case.failures == (
            "prompt: the system prompt is not present in what the model receives",
        )
        assert case.rendering.inspected and case.rendering.system_present is False
        assert len(case.outputs) == 3  # the runs still happen: the outputs are evidence too
    assert len(provider.inspected) == 2
    assert provider.inspected[0][0] == Message(role="system", content=contract.prompt.system or "")


async def test_context_window_overflow_fails(contract: Contract) -> None:
    provider = InspectableFake(GOOD_ANSWERS, inspection(prompt_tokens=100, context_window=120))
    cert = await certify(provider, contract, now=NOW)
    assert cert.cases[0].failures == (
        "prompt: 100 prompt tokens + 50 max_tokens = 150 > context window 120",
    )
    fits = InspectableFake(GOOD_ANSWERS, inspection(prompt_tokens=100, context_window=150))
    assert (await certify(fits, contract, now=NOW)).passed


async def test_inspection_evidence_is_recorded_when_it_passes(contract: Contract) -> None:
    cert = await certify(InspectableFake(GOOD_ANSWERS, inspection()), contract, now=NOW)
    assert cert.passed
    rendering = cert.cases[0].rendering
    assert rendering.inspected and rendering.notes == ()
    assert (rendering.prompt_tokens, rendering.tokenizer) == (40, "llama.cpp /tokenize")
    assert rendering.accepted_roles == ("assistant", "system", "user")
    assert rendering.context_window == 2048
    assert rendering.messages[-1] == Message(role="user", content="Review: Great mug, love it.")


@pytest.mark.parametrize(
    ("changes", "failure"),
    [
        (
            {"accepted_roles": frozenset({"user", "assistant"})},
            "prompt: role 'system' is not accepted by the chat format (assistant, user)",
        ),
        (
            {"control_tokens_special": False},
            "prompt: the chat control markers are not special tokens of the tokenizer",
        ),
    ],
)
async def test_chat_format_problems_fail(
    contract: Contract, changes: dict[str, Any], failure: str
) -> None:
    cert = await certify(InspectableFake(GOOD_ANSWERS, inspection(**changes)), contract, now=NOW)
    assert cert.cases[0].failures == (failure,)


async def test_unknown_control_tokens_or_window_do_not_fail(contract: Contract) -> None:
    relaxed = inspection(control_tokens_special=None, context_window=None, prompt_tokens=10**6)
    assert (await certify(InspectableFake(GOOD_ANSWERS, relaxed), contract, now=NOW)).passed


async def test_failed_inspection_fails_the_case(contract: Contract) -> None:
    down = InspectableFake(GOOD_ANSWERS, NotSent("tokenize endpoint down", provider="fake"))
    cert = await certify(down, contract, now=NOW)
    assert cert.cases[0].failures == (
        "prompt: inspection failed (not_sent): fake: not_sent: tokenize endpoint down",
    )


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
    assert bad.failures == (
        "render: contract sentiment: prompt.user: undefined variable 'review' "
        "('review' is undefined)",
    )
    assert not bad.rendering.ok
    assert len(provider.requests) == 3  # only the good case ran
    assert progress[-1] == ("bad", 3, 3)


async def test_contract_without_cases_cannot_pass(contract: Contract) -> None:
    empty = contract.model_copy(update={"cases": ()})
    cert = await certify(FakeProvider(GOOD_ANSWERS), empty, now=NOW)
    assert not cert.passed
    assert cert.is_valid_for(cert.contract_fingerprint, "fake-v1", NOW) == (
        False,
        "failed: contract has no cases: nothing was certified",
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
    with pytest.raises(ValueError, match="timezone-aware"):
        cert.is_valid_for(fp, "fake-v1", datetime(2025, 3, 1))  # naive on purpose


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
