"""`jobrouter.contracts.compare`: a live certification held against the recorded one, on the
shipped records of the real server (cassettes/<provider>/<contract>/certification.json) with
the one field each test changes. tests/acceptance/test_compare_recorded.py runs it through the
CLI against a real HTTP provider."""

from __future__ import annotations

from pathlib import Path

from jobrouter.contracts import Certification
from jobrouter.contracts.certification import CaseEvidence, Failure
from jobrouter.contracts.compare import Outcome, compare

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"


def _record(provider: str, contract: str) -> Certification:
    path = CASSETTES / provider / contract / "certification.json"
    return Certification.model_validate_json(path.read_text())


def _with_case(record: Certification, index: int, **changes: object) -> Certification:
    cases = list(record.cases)
    cases[index] = cases[index].model_copy(update=changes)
    return record.model_copy(update={"cases": tuple(cases)})


def test_the_same_record_is_same() -> None:
    record = _record("primary", "product_title")
    comparison = compare(record, record)
    assert comparison.outcome is Outcome.SAME
    assert comparison.lines() == ["primary x product_title: same"]


def test_other_outputs_with_the_same_verdicts_are_same_and_shown() -> None:
    """Temperature-0 answers need not repeat: the verdict is what the router acts on. Mutant:
    outputs compared as part of the verdict (differs)."""
    record = _record("primary", "product_title")
    live = _with_case(record, 0, outputs=({"title": "Saffron tea, organic"},) * 3)
    comparison = compare(record, live)
    assert comparison.outcome is Outcome.SAME
    assert comparison.lines() == [
        "primary x product_title: same (verdicts same; outputs differ in 1 of 5 cases)"
    ]


def test_a_case_failing_for_another_check_differs_though_the_cell_fails_both_times() -> None:
    """Recorded and live both fail the cell; one case fails another check live. Mutant: only
    the cell's verdict compared (same)."""
    record = _record("gemma_hosted", "shop_reply")
    case: CaseEvidence = record.cases[2]
    live = _with_case(record, 2, failures=(Failure(check="schema", run="1/3", detail="no reply"),))
    comparison = compare(record, live)
    assert comparison.outcome is Outcome.DIFFERS
    assert comparison.reason == "recorded fail 0/4, live fail 0/4"
    assert [c.case for c in comparison.differing] == [case.name]
    lines = comparison.lines()
    assert lines[1] == (
        "  case writing_to: recorded fail (rendering, behaviour: contains), live fail (schema)"
    )
    assert "    live failure: schema: run 1/3: no reply" in lines


def test_a_recording_of_another_contract_version_is_not_comparable() -> None:
    """Never a pass, never a difference of the provider: the recording is stale. Mutant: the
    fingerprint test dropped (compared as same)."""
    record = _record("primary", "product_title")
    live = record.model_copy(update={"contract_fingerprint": "other"})
    comparison = compare(record, live)
    assert comparison.outcome is Outcome.NOT_COMPARABLE
    assert "re-record it" in comparison.reason
    other_provider = record.model_copy(update={"provider_fingerprint": "other"})
    assert compare(record, other_provider).outcome is Outcome.NOT_COMPARABLE


def test_a_case_in_one_record_only_differs() -> None:
    """Mutant: cases paired by position only (a live case the recording lacks unseen)."""
    record = _record("primary", "product_title")
    live = record.model_copy(update={"cases": record.cases[:-1]})
    comparison = compare(record, live)
    assert comparison.outcome is Outcome.DIFFERS
    assert comparison.differing[0].live is None
    assert "live absent" in comparison.lines()[1]
    json_cell = comparison.as_json()
    assert json_cell["cases"][-1]["live"] is None
