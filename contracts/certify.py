"""Certify a provider for a contract: run every golden case and keep the evidence.

For each case, in order:

1. Render the prompt (sandboxed; a `RenderError` fails the case at ``rendering`` and no run is
   made) and inspect how the provider receives it (`jobrouter.contracts.rendering`).
2. Call the provider `sampling.repeats` times, one after the other. Each answer must parse as
   JSON (``json``), match the output schema (``schema``), pass the contract's checks and the
   case's expectations (``behaviour: <check>``). An answer the adapter itself rejected as
   invalid (`InvalidOutput`) fails the check it names, with the provider's usage kept; any
   other `ProviderError` fails that run at ``provider`` (other exceptions are bugs and
   propagate).
3. Judge the rendering with the prompt counts the provider reported (``rendering``: fail,
   unverified or pass), and measure agreement of the schema-valid outputs on `sampling.agree_on`
   (``agreement``; see `jobrouter.contracts.agreement`); runs without a usable output count against
   it.

A case whose checks all passed but one could not be performed is ``unverified``: it passes only
when `accept_unverified` (the provider config's waiver) names that check. A contract without
cases cannot pass: there would be no evidence.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from jobrouter.contracts import rendering
from jobrouter.contracts.agreement import agreement_key, measure_agreement
from jobrouter.contracts.certification import (
    CaseEvidence,
    Certification,
    Failure,
    RenderingEvidence,
    Verdict,
)
from jobrouter.contracts.checks import CheckFailure, run_checks, validate_output
from jobrouter.contracts.errors import RenderError
from jobrouter.contracts.fingerprint import contract_fingerprint
from jobrouter.contracts.model import Case, Contract
from jobrouter.contracts.render import build_request
from jobrouter.providers.base import Completion, CompletionRequest, Provider
from jobrouter.providers.errors import InvalidOutput, ProviderError

ProgressCallback = Callable[[str, int, int], None]
"""Called as ``progress(case_name, runs_done, runs_for_case)`` after each run of a case."""

INSPECTION_UNAVAILABLE = rendering.INSPECTION_UNAVAILABLE
DEFAULT_TTL = timedelta(days=7)


async def certify(
    provider: Provider,
    contract: Contract,
    *,
    now: datetime | None = None,
    ttl: timedelta = DEFAULT_TTL,
    progress: ProgressCallback | None = None,
    request_timeout: float | None = None,
    accept_unverified: Mapping[str, str] | None = None,
) -> Certification:
    """Run every case of `contract` against `provider` and return the certification record.

    `now` (timezone-aware; default: the current UTC time) becomes `certified_at`, and
    `expires_at` is `now + ttl`. `request_timeout` is each request's whole-call deadline (seconds).
    `accept_unverified` (check -> reason, from the provider's config) names the checks whose
    ``unverified`` verdict may pass; the record keeps them.
    """
    waivers = dict(accept_unverified or {})
    certified_at = datetime.now(UTC) if now is None else now
    if certified_at.tzinfo is None:
        raise ValueError("now must be timezone-aware (e.g. datetime.now(UTC))")
    provider_fingerprint = provider.fingerprint
    cases: list[CaseEvidence] = []
    for case in contract.cases:  # one after the other: a provider's rate limit is not ours
        cases.append(
            await certify_case(
                provider,
                contract,
                case,
                progress=progress,
                request_timeout=request_timeout,
                accept_unverified=waivers,
            )
        )
    failures = (
        ()
        if cases
        else (Failure(check="cases", detail="contract has no cases: nothing was certified"),)
    )
    return Certification(
        provider=provider.name,
        provider_fingerprint=provider_fingerprint,
        contract=contract.name,
        contract_version=contract.version,
        contract_fingerprint=contract_fingerprint(contract),
        passed=bool(cases) and all(case.passed for case in cases),
        cases=tuple(cases),
        failures=failures,
        waivers=waivers,
        certified_at=certified_at,
        expires_at=certified_at + ttl,
    )


async def certify_case(
    provider: Provider,
    contract: Contract,
    case: Case,
    *,
    progress: ProgressCallback | None = None,
    request_timeout: float | None = None,
    accept_unverified: Mapping[str, str] | None = None,
) -> CaseEvidence:
    """The evidence for one case (steps 1-3 of the module docstring)."""
    repeats = contract.sampling.repeats
    try:
        request = build_request(
            contract, case.input, timeout=request_timeout, labels={"case": case.name}
        )
    except RenderError as exc:
        if progress is not None:
            progress(case.name, repeats, repeats)  # no run will happen: the case is done
        return _unrenderable(case, exc)
    inspected = await rendering.inspect(provider, contract, request.messages, request.output_schema)
    runs: list[_Run] = []
    for index in range(1, repeats + 1):
        runs.append(await _run_once(provider, contract, case, request, f"{index}/{repeats}"))
        if progress is not None:
            progress(case.name, index, repeats)
    judged, failures = rendering.judge(inspected, contract, [run.prompt_tokens for run in runs])
    for run in runs:
        failures.extend(run.failures)
    share, agreement_failure = _agreement(contract, runs)
    if agreement_failure:
        failures.append(agreement_failure)
    evidence = _evidence(case, judged, runs, failures, share, accept_unverified or {})
    return evidence.model_copy(update=_stability(contract, runs, share))


def _evidence(
    case: Case,
    judged: RenderingEvidence,
    runs: list[_Run],
    failures: list[Failure],
    share: float,
    waivers: Mapping[str, str],
) -> CaseEvidence:
    unverified = ("rendering",) if judged.verdict == "unverified" else ()
    verdict: Verdict = "fail" if failures else ("unverified" if unverified else "pass")
    waived = verdict == "unverified" and all(check in waivers for check in unverified)
    if waived:
        judged = judged.model_copy(update={"waived": waivers["rendering"]})
    return CaseEvidence(
        name=case.name,
        passed=verdict == "pass" or waived,
        verdict=verdict,
        rendering=judged,
        runs=len(runs),
        outputs=tuple(run.output for run in runs if run.parsed),
        failures=tuple(failures),
        unverified=unverified,
        agreement=share,
    )


def _stability(contract: Contract, runs: list[_Run], share: float) -> dict[str, Any]:
    """What the case's identical requests showed of the provider's determinism: the runs'
    finish reasons, how many distinct answers they gave, how many runs differ from the most
    common answer, and the agreement's margin over `min_agreement` (negative: failed by it)."""
    answers = Counter(run.answer for run in runs if run.answer is not None)
    answered = sum(answers.values())
    return {
        "finish_reasons": tuple(run.finish_reason for run in runs),
        "distinct_answers": len(answers),
        "differing_runs": answered - max(answers.values(), default=0),
        # in whole percent, as `meets` compares: 2 of 3 at 0.67 passed with a margin of 0
        "agreement_margin": (round(share * 100) - round(contract.sampling.min_agreement * 100))
        / 100,
    }


def _unrenderable(case: Case, error: RenderError) -> CaseEvidence:
    return CaseEvidence(
        name=case.name,
        passed=False,
        verdict="fail",
        rendering=RenderingEvidence(ok=False, verdict="fail", error=str(error)),
        runs=0,
        failures=(Failure(check="rendering", detail=f"the prompt template: {error}"),),
    )


@dataclass
class _Run:
    parsed: bool = False  # the answer parsed as JSON
    usable: bool = False  # ... and matched the output schema
    output: Any = None
    failures: list[Failure] = field(default_factory=list)
    prompt_tokens: int | None = None
    answer: str | None = None  # the raw text, to tell identical unusable answers from differing
    finish_reason: str | None = None  # the provider's: "length" is an answer cut at max_tokens


async def _run_once(
    provider: Provider, contract: Contract, case: Case, request: CompletionRequest, label: str
) -> _Run:
    try:
        completion = await provider.complete(request)
    except InvalidOutput as exc:  # the adapter validated the answer itself: name its check
        return _invalid(exc, label)
    except ProviderError as exc:
        return _Run(
            failures=[Failure(check="provider", run=label, detail=f"{exc.kind.value}: {exc}")]
        )
    run = _Run(
        prompt_tokens=completion.usage.prompt_tokens,
        answer=completion.text,
        finish_reason=completion.finish_reason,
    )
    try:
        run.output = _parse(completion)
    except ValueError as exc:
        detail = f"{_cut_off(completion.finish_reason)}output is not JSON: {exc}"
        run.failures.append(Failure(check="json", run=label, detail=detail))
        return run
    run.parsed = True
    errors = validate_output(contract, run.output)
    if errors:
        run.failures.extend(Failure(check="schema", run=label, detail=e) for e in errors)
        return run
    run.usable = True
    run.failures.extend(
        _behaviour(f, "contract check", label) for f in run_checks(contract.checks, run.output)
    )
    run.failures.extend(
        _behaviour(f, "case expectation", label) for f in run_checks(case.expect, run.output)
    )
    return run


def _invalid(exc: InvalidOutput, label: str) -> _Run:
    run = _Run(
        prompt_tokens=exc.prompt_tokens,
        failures=[
            Failure(check=exc.check, run=label, detail=_cut_off(exc.finish_reason) + exc.message)
        ],
        answer=exc.text,
        finish_reason=exc.finish_reason,
    )
    if exc.check == "schema":  # JSON it was; keep it as evidence like the certifier's own parse
        try:
            run.output, run.parsed = json.loads(exc.text), True
        except json.JSONDecodeError:  # a fenced answer the adapter unwrapped: keep the text
            run.output, run.parsed = exc.text, True
    return run


def _cut_off(finish_reason: str | None) -> str:
    """Why an answer is unusable when the provider says it stopped at the token limit."""
    if finish_reason == "length":
        return "cut off at max_tokens (finish reason length): "
    return ""


def _behaviour(failure: CheckFailure, source: str, label: str) -> Failure:
    note = f" ({failure.note})" if failure.note else ""
    return Failure(
        check=f"behaviour: {failure.check}",
        run=label,
        detail=f"{source} at {failure.path}: found {failure.found}, expected "
        f"{failure.expected}{note}",
    )


def _agreement(contract: Contract, runs: list[_Run]) -> tuple[float, Failure | None]:
    """The agreement share of the runs, and the failure line when it is too low."""
    sampling = contract.sampling
    agreement = measure_agreement(
        [run.output for run in runs if run.usable],
        sampling.agree_on,
        sampling.min_agreement,
        runs=len(runs),
    )
    if agreement.passed:
        return agreement.share, None
    share = f"(share {agreement.share:.2f} < min_agreement {sampling.min_agreement})"
    detail = f"{_agreement_detail(contract, runs, agreement.agreeing)} {share}"
    return agreement.share, Failure(check="agreement", detail=detail)


def _agreement_detail(contract: Contract, runs: list[_Run], agreeing: int) -> str:
    """Why agreement failed, in words that keep apart runs that answered the same unusable
    thing (consistent, but invalid) from runs that answered differently (inconsistent)."""
    agree_on = contract.sampling.agree_on
    paths = ", ".join(agree_on) or "$"
    usable = [run for run in runs if run.usable]
    unusable = [run for run in runs if not run.usable]
    checks = ", ".join(dict.fromkeys(f.check for run in unusable for f in run.failures))
    if not usable:
        answers = {run.answer for run in runs}
        if len(runs) > 1 and len(answers) == 1 and None not in answers:
            return (
                f"all {len(runs)} runs identical but invalid ({checks}): "
                f"no usable output to agree on [{paths}]"
            )
        return f"0/{len(runs)} runs usable ({checks}): no output to agree on [{paths}]"
    parts = [f"{agreeing}/{len(runs)} runs agree on [{paths}]"]
    distinct = len({agreement_key(run.output, agree_on) for run in usable})
    if distinct > 1:
        parts.append(f"runs disagree: {distinct} different answers")
    if unusable:
        parts.append(f"{len(unusable)} without a usable output ({checks})")
    return "; ".join(parts)


def _parse(completion: Completion) -> Any:
    """The completion's output as plain JSON values (parsed from `text` if the provider did not)."""
    output = completion.output
    if output is None:
        text = completion.text.strip()
        if not text:
            raise ValueError("empty answer")
        try:
            output = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{exc.msg} in {text[:120]!r}") from exc
    try:
        return json.loads(json.dumps(output, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not representable as JSON ({exc})") from exc
