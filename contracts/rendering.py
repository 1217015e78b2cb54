"""The `rendering` check of a case: what the model really reads, against the provider's own count.

Two sources of truth, both kept in `RenderingEvidence`:

1. The provider's inspection (`InspectableProvider.inspect_prompt`): the prompt rendered through
   its chat format and counted by its tokenizer (or an estimate), the roles it accepts, whether
   the system text is in what the model reads, how each control marker is split.
2. The provider's own count: `usage.prompt_tokens` of every run. It must agree with the
   product's count within `tolerance` (`EXACT_TOLERANCE` tokens for an exact count; for an
   estimate `ESTIMATE_TOLERANCE_MIN` tokens or `ESTIMATE_TOLERANCE_SHARE` of the count, the
   larger; for a lower bound only a smaller count fails). A difference beyond it fails with
   both numbers and what it suggests (`diagnose`).

Verdict: ``fail`` when any of these fails; ``unverified`` when something could not be checked
(the provider cannot be inspected, its chat format is not reproduced, it reported no usage, its
context window is unknown so the prompt's fit could not be checked, or an estimate cannot tell
whether a short system text arrived); otherwise ``pass``. ``unverified``
is never a pass: `jobrouter.contracts.certify` lets it through only under a named waiver.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from jobrouter.contracts.certification import Failure, RenderingEvidence, Seen, Verdict
from jobrouter.contracts.model import Contract
from jobrouter.providers.base import InspectableProvider, Message, PromptInspection, Provider
from jobrouter.providers.errors import ProviderError

# llama.cpp's usage equals its /extras/tokenize count exactly (201 of 201 completions
# measured); 2 tokens leave room for a BOS/EOS handling difference between server versions,
# and are less than any system text (a role line alone is more).
EXACT_TOLERANCE = 2
# litellm's token_counter is exact for OpenAI models and a cl100k approximation otherwise;
# per-message overhead differs by provider.
ESTIMATE_TOLERANCE_MIN = 8
ESTIMATE_TOLERANCE_SHARE = 0.15

INSPECTION_UNAVAILABLE = "prompt inspection unavailable"
NO_USAGE = "the provider reported no usage: its prompt token count could not be compared"
UNKNOWN_WINDOW = (
    "the model's context window is unknown (litellm does not know the model and the "
    "provider config sets no context_window): whether {tokens} prompt tokens + "
    "{max_tokens} max_tokens fit could not be checked"
)


def tolerance(basis: str, expected: int) -> int:
    if basis == "exact":
        return EXACT_TOLERANCE
    return max(ESTIMATE_TOLERANCE_MIN, math.ceil(ESTIMATE_TOLERANCE_SHARE * expected))


async def inspect(
    provider: Provider,
    contract: Contract,
    messages: tuple[Message, ...],
    output_schema: dict[str, object] | None,
) -> RenderingEvidence:
    """The provider's side of the evidence (no verdict yet: `judge` decides with the usage)."""
    if not isinstance(provider, InspectableProvider):
        return RenderingEvidence(
            ok=True,
            messages=messages,
            system_sent=_sends_system(messages),
            unverified=(
                f"{INSPECTION_UNAVAILABLE}: the provider cannot show how it receives the prompt",
            ),
        )
    try:
        inspection = await provider.inspect_prompt(messages, output_schema)
    except ProviderError as exc:
        return RenderingEvidence(
            ok=True,
            messages=messages,
            system_sent=_sends_system(messages),
            error=f"prompt inspection failed: {exc}",
            unverified=(f"prompt inspection failed ({exc.kind.value}): {exc}",),
        )
    return _evidence(messages, inspection)


def _evidence(messages: tuple[Message, ...], inspection: PromptInspection) -> RenderingEvidence:
    return RenderingEvidence(
        ok=True,
        messages=messages,
        inspected=True,
        accepted_roles=tuple(sorted(inspection.accepted_roles)),
        system_sent=_sends_system(messages),
        system_rendered=inspection.system_rendered,
        prompt_tokens=inspection.prompt_tokens,
        tokenizer=inspection.tokenizer,
        count_basis=inspection.count_basis,
        prompt_tokens_without_system=inspection.prompt_tokens_without_system,
        tolerance=tolerance(inspection.count_basis, inspection.prompt_tokens),
        context_window=inspection.context_window,
        control_tokens_special=inspection.control_tokens_special,
        markers=inspection.markers,
        markers_tokenization="measured"
        if inspection.markers_measured
        else "configured, not measured",
        rendered=inspection.rendered,
        unverified=inspection.unverified,
        notes=inspection.notes,
    )


def _sends_system(messages: tuple[Message, ...]) -> bool:
    return any(m.role == "system" for m in messages)


def judge(
    evidence: RenderingEvidence, contract: Contract, reported: Sequence[int | None]
) -> tuple[RenderingEvidence, list[Failure]]:
    """The rendering verdict from the inspection and the provider's reported counts."""
    failures = [
        Failure(check="rendering", detail=d) for d in _inspection_problems(evidence, contract)
    ]
    unverified = [*evidence.unverified, *_window_unknown(evidence, contract)]
    diagnosis = None
    counted = [r for r in reported if r is not None]
    if not counted:
        unverified.append(NO_USAGE)
    elif evidence.prompt_tokens is not None:
        mismatch = _count_mismatch(evidence, reported)
        if mismatch is not None:
            run, diagnosis, detail = mismatch
            failures.append(Failure(check="rendering", detail=detail, run=run))
        unverified.extend(_system_unshown(evidence, contract))
    verdict: Verdict = "fail" if failures else ("unverified" if unverified else "pass")
    seen = rendering_seen(evidence, counted)
    judged = evidence.model_copy(
        update={
            "verdict": verdict,
            "reported_prompt_tokens": tuple(reported),
            "unverified": tuple(unverified),
            "diagnosis": diagnosis,
            "system_seen": system_seen(evidence, counted),
            "rendering_seen": seen,
            "control_tokens_special": (None if seen is False else evidence.control_tokens_special),
        }
    )
    return judged, failures


def _allowed(evidence: RenderingEvidence) -> int:
    return evidence.tolerance if evidence.tolerance is not None else EXACT_TOLERANCE


def rendering_seen(evidence: RenderingEvidence, counted: Sequence[int]) -> Seen:
    """Whether the provider's counts show it read the configured rendering: only an exact count
    can say so (an estimate's tolerance hides a marker or two)."""
    expected = evidence.prompt_tokens
    if evidence.count_basis != "exact" or expected is None or not counted:
        return "unknown"
    return all(abs(count - expected) <= _allowed(evidence) for count in counted)


def system_seen(evidence: RenderingEvidence, counted: Sequence[int]) -> Seen:
    """What the provider's counts imply of the system text: read (every count is the prompt's
    with it), not read (a count is the prompt's without it, or the rendering itself has none and
    the counts confirm it), or unknown (no counts, or the two prompts too close to tell)."""
    if not evidence.system_sent:
        return False
    expected, without = evidence.prompt_tokens, evidence.prompt_tokens_without_system
    if expected is None or not counted:
        return "unknown"
    allowed = _allowed(evidence)
    matches = [abs(count - expected) <= allowed for count in counted]
    if evidence.system_rendered is False and all(matches):
        return False
    if without is None or expected - without <= allowed:
        return "unknown"
    if all(matches):
        return True
    if any(abs(count - without) <= allowed for count in counted):
        return False
    return "unknown"


def _inspection_problems(evidence: RenderingEvidence, contract: Contract) -> list[str]:
    if not evidence.inspected:
        return []
    problems: list[str] = []
    accepted = evidence.accepted_roles or ()
    for role in sorted({m.role for m in evidence.messages} - set(accepted)):
        problems.append(f"role {role!r} is not accepted by the chat format ({', '.join(accepted)})")
    if contract.prompt.system is not None and evidence.system_rendered is False:
        problems.append("the system prompt is not present in what the model receives")
    split = [m for m in evidence.markers if not m.special]
    if split:
        shown = ", ".join(f"{m.marker!r} -> {list(m.token_ids)}" for m in split)
        problems.append(
            "the chat markers are not control tokens of the model's tokenizer "
            f"(plain text to the model): {shown}"
        )
    window, tokens = evidence.context_window, evidence.prompt_tokens
    if window is not None and tokens is not None and tokens + contract.sampling.max_tokens > window:
        problems.append(
            f"{tokens} prompt tokens + {contract.sampling.max_tokens} max_tokens = "
            f"{tokens + contract.sampling.max_tokens} > context window {window}"
        )
    return problems


def _window_unknown(evidence: RenderingEvidence, contract: Contract) -> list[str]:
    """Every model has a context window; not knowing it is a check not made, never a pass."""
    if (
        not evidence.inspected
        or evidence.prompt_tokens is None
        or evidence.context_window is not None
    ):
        return []
    return [
        UNKNOWN_WINDOW.format(
            tokens=evidence.prompt_tokens, max_tokens=contract.sampling.max_tokens
        )
    ]


def _count_mismatch(
    evidence: RenderingEvidence, reported: Sequence[int | None]
) -> tuple[str, str, str] | None:
    """(run, diagnosis, failure detail) for the first run whose count disagrees, or None."""
    expected = evidence.prompt_tokens
    assert expected is not None
    allowed = _allowed(evidence)
    for index, count in enumerate(reported, start=1):
        if count is None:
            continue
        too_few = count < expected - allowed
        if not too_few and (count <= expected + allowed or evidence.count_basis == "lower_bound"):
            continue
        diagnosis = diagnose(
            expected,
            evidence.prompt_tokens_without_system,
            count,
            allowed,
            split_markers=any(not m.special for m in evidence.markers),
            markers_measured=evidence.markers_tokenization == "measured",
        )
        detail = (
            f"the provider counted {count} prompt tokens, the product {expected} "
            f"({evidence.tokenizer}, {evidence.count_basis}, tolerance {allowed}): "
            f"{diagnosis}"
        )
        return f"{index}/{len(reported)}", diagnosis, detail
    return None


def diagnose(
    expected: int,
    without_system: int | None,
    reported: int,
    allowed: int,
    *,
    split_markers: bool,
    markers_measured: bool = False,
) -> str:
    """What a count difference suggests: the system text dropped, text lost, or text added.

    With markers measured as control tokens, "markers split" is ruled out by the evidence
    beside it: the server renders other markers than the configured format's."""
    if (
        without_system is not None
        and expected - without_system > allowed
        and abs(reported - without_system) <= allowed
    ):
        return (
            f"system text dropped: {reported} is the count of the prompt without it "
            f"({without_system})"
        )
    if reported < expected:
        return f"{expected - reported} tokens fewer than meant: text dropped or cut"
    if split_markers:
        cause = "control markers split into plain tokens"
    elif markers_measured:
        cause = (
            "the server renders another template than the configured chat format (whose "
            "markers are control tokens of this tokenizer, measured), or adds text"
        )
    else:
        cause = "a template added, or markers split into plain tokens"
    return f"{reported - expected} tokens more than meant: {cause}"


def _system_unshown(evidence: RenderingEvidence, contract: Contract) -> list[str]:
    """An estimate cannot show a system text shorter than its tolerance arrived."""
    without, expected = evidence.prompt_tokens_without_system, evidence.prompt_tokens
    if (
        contract.prompt.system is None
        or evidence.count_basis != "estimate"
        or without is None
        or expected is None
    ):
        return []
    allowed = evidence.tolerance or 0
    if expected - without > allowed:
        return []
    return [
        f"the system text is {expected - without} tokens, within the estimate's tolerance "
        f"of {allowed}: the provider's count cannot show that it arrived"
    ]
