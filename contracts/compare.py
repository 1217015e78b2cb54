"""Recorded vs live: does a provider, called today, earn the verdicts its recording shows?

A cassette replays the answers a provider gave once; a certification from it proves that the
product judges those answers the same way, not that the provider still gives them (issue 32: a
recorded 4/4 pass failed live with byte-identical requests). `compare` holds a live
certification against the recorded one (the `certification.json` kept beside a cassette), case
by case:

- **same**: the cell's verdict, and every case's verdict and failing checks, are the recorded
  ones. Outputs may still differ (temperature-0 answers need not repeat); they are shown, and
  do not make a difference by themselves: the verdict is what the router acts on.
- **differs**: a case's verdict or failing checks changed, or a case is in one record only.
  Each differing case keeps both verdicts, both checks and both outputs.
- **not comparable**: the two records are of another contract or provider fingerprint (the
  recording is stale: re-record it first). Its own outcome, never a pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from jobrouter.contracts.certification import CaseEvidence, Certification

_SHOWN = 3  # failures shown per side of a differing case (the JSON report keeps the records)


class Outcome(StrEnum):
    SAME = "same"
    DIFFERS = "differs"
    NOT_COMPARABLE = "not comparable"
    NOT_RECORDED = "not recorded"  # no recorded certification to compare with


@dataclass(frozen=True)
class CaseComparison:
    """One golden case, recorded and live (None: the case is not in that record)."""

    case: str
    recorded: CaseEvidence | None
    live: CaseEvidence | None

    @property
    def same(self) -> bool:
        if self.recorded is None or self.live is None:
            return False
        return _judged(self.recorded) == _judged(self.live)

    @property
    def outputs_same(self) -> bool:
        return _outputs(self.recorded) == _outputs(self.live)

    def lines(self) -> list[str]:
        """How the case differs: both verdicts with their checks, both outputs."""
        recorded, live = _verdict(self.recorded), _verdict(self.live)
        lines = [f"  case {self.case}: recorded {recorded}, live {live}"]
        for side, case in (("recorded", self.recorded), ("live", self.live)):
            lines.append(f"    {side} outputs: {list(_outputs(case))!r}")
            failures = case.failures if case is not None else ()
            lines += [f"    {side} failure: {failure}" for failure in failures[:_SHOWN]]
        return lines


@dataclass(frozen=True)
class Comparison:
    """A provider x contract cell, recorded against live."""

    provider: str
    contract: str
    outcome: Outcome
    reason: str = ""
    cases: tuple[CaseComparison, ...] = field(default=())

    @property
    def differing(self) -> tuple[CaseComparison, ...]:
        return tuple(case for case in self.cases if not case.same)

    def lines(self) -> list[str]:
        """The cell's line, then each differing case with both outputs."""
        varied = sum(case.same and not case.outputs_same for case in self.cases)
        head = f"{self.provider} x {self.contract}: {self.outcome}"
        if self.reason:
            head += f" ({self.reason})"
        elif self.outcome is Outcome.SAME and varied:
            head += f" (verdicts same; outputs differ in {varied} of {len(self.cases)} cases)"
        lines = [head]
        for case in self.differing:
            lines += case.lines()
        return lines

    def as_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "contract": self.contract,
            "outcome": str(self.outcome),
            "reason": self.reason,
            "cases": [
                {
                    "case": case.case,
                    "same": case.same,
                    "recorded": _judged(case.recorded),
                    "live": _judged(case.live),
                    "recorded_outputs": list(_outputs(case.recorded)),
                    "live_outputs": list(_outputs(case.live)),
                }
                for case in self.cases
            ],
        }


def compare(recorded: Certification, live: Certification) -> Comparison:
    """`live` held against `recorded` (see the module docstring)."""
    provider, contract = live.provider, live.contract
    stale = _stale(recorded, live)
    if stale:
        return Comparison(provider, contract, Outcome.NOT_COMPARABLE, reason=stale)
    cases = _pair_cases(recorded.cases, live.cases)
    same = recorded.passed == live.passed and all(case.same for case in cases)
    reason = "" if same else f"recorded {_cell(recorded)}, live {_cell(live)}"
    outcome = Outcome.SAME if same else Outcome.DIFFERS
    return Comparison(provider, contract, outcome, reason=reason, cases=cases)


def not_recorded(provider: str, contract: str, where: str) -> Comparison:
    return Comparison(
        provider=provider,
        contract=contract,
        outcome=Outcome.NOT_RECORDED,
        reason=f"no recorded certification at {where}",
    )


def _stale(recorded: Certification, live: Certification) -> str:
    if recorded.contract_fingerprint != live.contract_fingerprint:
        return "the recording is of another version of the contract: re-record it"
    if recorded.provider_fingerprint != live.provider_fingerprint:
        return "the recording is of another provider configuration: re-record it"
    return ""


def _pair_cases(
    recorded: Sequence[CaseEvidence], live: Sequence[CaseEvidence]
) -> tuple[CaseComparison, ...]:
    by_name = {case.name: case for case in live}
    pairs = [CaseComparison(case.name, case, by_name.pop(case.name, None)) for case in recorded]
    pairs += [CaseComparison(name, None, case) for name, case in by_name.items()]
    return tuple(pairs)


def _judged(case: CaseEvidence | None) -> dict[str, Any] | None:
    if case is None:
        return None
    return {"verdict": case.verdict, "passed": case.passed, "failed_checks": case.failed_checks}


def _verdict(case: CaseEvidence | None) -> str:
    if case is None:
        return "absent"
    checks = f" ({', '.join(case.failed_checks)})" if case.failed_checks else ""
    return f"{case.verdict}{checks}"


def _outputs(case: CaseEvidence | None) -> tuple[Any, ...]:
    return () if case is None else tuple(case.outputs)


def _cell(certification: Certification) -> str:
    passed = sum(case.passed for case in certification.cases)
    verdict = "pass" if certification.passed else certification.verdict
    return f"{verdict} {passed}/{len(certification.cases)}"
