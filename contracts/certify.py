"""Certify a provider for a contract: run every golden case and keep the evidence.

For each case, in order:

1. Render the prompt (sandboxed; a `RenderError` fails the case and no run is made). If the
   provider is an `InspectableProvider`, ask how it receives the messages and fail the case when a
   role is not accepted, the system prompt is not present although the contract has one, the chat
   control tokens are not special tokens, or prompt tokens + max_tokens exceed the context window.
   A provider that cannot be inspected is *not* failed for that: hosted APIs apply their own chat
   format and cannot show it. The case records ``prompt inspection unavailable`` and takes its
   prompt token count from the provider's reported usage, so the record says what was not checked.
2. Call the provider `sampling.repeats` times, one after the other. Each answer must parse as
   JSON, match the output schema, pass the contract's checks and the case's expectations. A
   `ProviderError` fails that run with its kind and message (other exceptions are bugs and
   propagate).
3. Measure agreement of the schema-valid outputs on `sampling.agree_on` (see
   `contracts.agreement`); runs without a usable output count against it.

A contract without cases cannot pass: there would be no evidence.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from contracts.agreement import measure_agreement
from contracts.certification import CaseEvidence, Certification, RenderingEvidence
from contracts.checks import run_checks, validate_output
from contracts.errors import RenderError
from contracts.fingerprint import contract_fingerprint
from contracts.model import Case, Contract
from contracts.render import build_request
from providers.base import (
    Completion,
    CompletionRequest,
    InspectableProvider,
    Message,
    PromptInspection,
    Provider,
)
from providers.errors import ProviderError

ProgressCallback = Callable[[str, int, int], None]
"""Called as ``progress(case_name, runs_done, runs_for_case)`` after each run of a case."""

INSPECTION_UNAVAILABLE = "prompt inspection unavailable"
DEFAULT_TTL = timedelta(days=7)


async def certify(
    provider: Provider,
    contract: Contract,
    *,
    now: datetime | None = None,
    ttl: timedelta = DEFAULT_TTL,
    progress: ProgressCallback | None = None,
    request_timeout: float | None = None,
) -> Certification:
    """Run every case of `contract` against `provider` and return the certification record.

    `now` (timezone-aware; default: the current UTC time) becomes `certified_at`, and
    `expires_at` is `now + ttl`. `request_timeout` is each request's whole-call deadline (seconds).
    """
    certified_at = datetime.now(UTC) if now is None else now
    if certified_at.tzinfo is None:
        raise ValueError("now must be timezone-aware (e.g. datetime.now(UTC))")
    provider_fingerprint = provider.fingerprint
    cases: list[CaseEvidence] = []
    for case in contract.cases:  # one after the other: a provider's rate limit is not ours
        cases.append(
            await certify_case(
                provider, contract, case, progress=progress, request_timeout=request_timeout
            )
        )
    failures = () if cases else ("contract has no cases: nothing was certified",)
    return Certification(
        provider=provider.name,
        provider_fingerprint=provider_fingerprint,
        contract=contract.name,
        contract_version=contract.version,
        contract_fingerprint=contract_fingerprint(contract),
        passed=bool(cases) and all(case.passed for case in cases),
        cases=tuple(cases),
        failures=failures,
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
    rendering, failures = await _inspect(provider, contract, request.messages)
    runs: list[_Run] = []
    for index in range(1, repeats + 1):
        runs.append(await _run_once(provider, contract, case, request, f"run {index}/{repeats}"))
        if progress is not None:
            progress(case.name, index, repeats)
    for run in runs:
        failures.extend(run.failures)
    share, agreement_failure = _agreement(contract, runs)
    if agreement_failure:
        failures.append(agreement_failure)
    return CaseEvidence(
        name=case.name,
        passed=not failures,
        rendering=_with_usage_tokens(rendering, runs),
        runs=repeats,
        outputs=tuple(run.output for run in runs if run.parsed),
        failures=tuple(failures),
        agreement=share,
    )


def _unrenderable(case: Case, error: RenderError) -> CaseEvidence:
    return CaseEvidence(
        name=case.name,
        passed=False,
        rendering=RenderingEvidence(ok=False, error=str(error)),
        runs=0,
        failures=(f"render: {error}",),
    )


@dataclass
class _Run:
    parsed: bool = False  # the answer parsed as JSON
    usable: bool = False  # ... and matched the output schema
    output: Any = None
    failures: list[str] = field(default_factory=list)
    prompt_tokens: int | None = None


async def _run_once(
    provider: Provider, contract: Contract, case: Case, request: CompletionRequest, label: str
) -> _Run:
    try:
        completion = await provider.complete(request)
    except ProviderError as exc:
        return _Run(failures=[f"{label}: provider error ({exc.kind.value}): {exc}"])
    run = _Run(prompt_tokens=completion.usage.prompt_tokens)
    try:
        run.output = _parse(completion)
    except ValueError as exc:
        run.failures.append(f"{label}: output is not JSON: {exc}")
        return run
    run.parsed = True
    errors = validate_output(contract, run.output)
    if errors:
        run.failures.extend(f"{label}: schema: {error}" for error in errors)
        return run
    run.usable = True
    run.failures.extend(f"{label}: check {f}" for f in run_checks(contract.checks, run.output))
    run.failures.extend(f"{label}: expect {f}" for f in run_checks(case.expect, run.output))
    return run


def _agreement(contract: Contract, runs: list[_Run]) -> tuple[float, str | None]:
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
    paths = ", ".join(sampling.agree_on) or "$"
    return agreement.share, (
        f"agreement: {agreement.agreeing}/{agreement.runs} runs agree on [{paths}] "
        f"(share {agreement.share:.2f} < min_agreement {sampling.min_agreement})"
    )


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


async def _inspect(
    provider: Provider, contract: Contract, messages: tuple[Message, ...]
) -> tuple[RenderingEvidence, list[str]]:
    if not isinstance(provider, InspectableProvider):
        evidence = RenderingEvidence(ok=True, messages=messages, notes=(INSPECTION_UNAVAILABLE,))
        return evidence, []
    try:
        inspection = await provider.inspect_prompt(messages)
    except ProviderError as exc:
        evidence = RenderingEvidence(
            ok=True, messages=messages, error=f"prompt inspection failed: {exc}"
        )
        return evidence, [f"prompt: inspection failed ({exc.kind.value}): {exc}"]
    evidence = RenderingEvidence(
        ok=True,
        messages=messages,
        inspected=True,
        accepted_roles=tuple(sorted(inspection.accepted_roles)),
        system_present=inspection.system_present,
        prompt_tokens=inspection.prompt_tokens,
        tokenizer=inspection.tokenizer,
        context_window=inspection.context_window,
        control_tokens_special=inspection.control_tokens_special,
        rendered=inspection.rendered,
        notes=inspection.notes,
    )
    return evidence, _inspection_failures(contract, messages, inspection)


def _inspection_failures(
    contract: Contract, messages: tuple[Message, ...], inspection: PromptInspection
) -> list[str]:
    failures: list[str] = []
    accepted = ", ".join(sorted(inspection.accepted_roles))
    for role in sorted({message.role for message in messages} - inspection.accepted_roles):
        failures.append(f"prompt: role {role!r} is not accepted by the chat format ({accepted})")
    if contract.prompt.system is not None and not inspection.system_present:
        failures.append("prompt: the system prompt is not present in what the model receives")
    if inspection.control_tokens_special is False:
        failures.append("prompt: the chat control markers are not special tokens of the tokenizer")
    window = inspection.context_window
    needed = inspection.prompt_tokens + contract.sampling.max_tokens
    if window is not None and needed > window:
        failures.append(
            f"prompt: {inspection.prompt_tokens} prompt tokens + "
            f"{contract.sampling.max_tokens} max_tokens = {needed} > context window {window}"
        )
    return failures


def _with_usage_tokens(rendering: RenderingEvidence, runs: list[_Run]) -> RenderingEvidence:
    """Without inspection, record the prompt token count the provider reported, if any."""
    if rendering.inspected or rendering.prompt_tokens is not None:
        return rendering
    for index, run in enumerate(runs, start=1):
        if run.prompt_tokens is not None:
            return rendering.model_copy(
                update={
                    "prompt_tokens": run.prompt_tokens,
                    "tokenizer": f"provider usage, run {index}",
                }
            )
    return rendering
