"""The certification matrix as `jobrouter contracts run | status` print it, against a golden file.

One cell of each status: pass, pass under a waiver, fail (naming its failing checks first),
unverified, stale, expired, missing.
The golden file was written once from this output after reading it; the comparison is exact.
To change the format on purpose, regenerate it with ``JOBROUTER_REGOLD=1`` and review the diff.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jobrouter.certifier import Cell
from jobrouter.contracts import CaseEvidence, Certification, RenderingEvidence, Validity
from jobrouter.contracts.certification import Failure
from jobrouter.printing import cell_text, render_matrix

GOLDEN = Path(__file__).with_name("golden") / "matrix.txt"
WIDTH = 100
CERTIFIED_AT = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)


def certification(
    provider: str,
    contract: str,
    failures: tuple[Failure, ...] = (),
    *,
    unverified: bool = False,
    waivers: dict[str, str] | None = None,
) -> Certification:
    waivers = waivers or {}
    verdict = "fail" if failures else ("unverified" if unverified else "pass")
    passed = verdict == "pass" or (verdict == "unverified" and "rendering" in waivers)
    reason = ("the provider reported no usage: its prompt token count could not be compared",)
    rendering = RenderingEvidence(
        ok=True,
        verdict="unverified" if unverified else "pass",
        unverified=reason if unverified else (),
    )
    case = CaseEvidence(
        name="tea",
        passed=passed,
        verdict=verdict,
        rendering=rendering,
        runs=3,
        failures=failures,
        unverified=("rendering",) if unverified else (),
        agreement=1.0,
    )
    return Certification(
        provider=provider,
        provider_fingerprint="p" * 64,
        contract=contract,
        contract_version=1,
        contract_fingerprint="sha256:" + "c" * 64,
        passed=passed,
        cases=(case,),
        waivers=waivers,
        certified_at=CERTIFIED_AT,
        expires_at=CERTIFIED_AT + timedelta(days=7),
    )


FAILURE = Failure(
    check="behaviour: contains",
    run="2/3",
    detail='case expectation at title: found "Gift set", expected to contain "tea"',
)
# Square brackets are text, not console markup: this line once lost "[name, price]".
AGREEMENT = Failure(
    check="agreement", detail="1/3 runs agree on [name, price] (share 0.33 < min_agreement 0.67)"
)
# A long first failure: the checks must still be named in full, before the cut detail.
SCHEMA = Failure(
    check="schema",
    run="1/3",
    detail="answer does not match the output schema at "
    "$.price: 'twelve euros and ninety cents, shipping included' is not of type "
    "'number'",
)
WAIVER = {"rendering": "hosted API: template not visible; accepted by ops 2026-01-05"}
CELLS = [
    Cell(
        "primary",
        "product_title",
        Validity.PASS,
        "valid until 2026-01-12T09:30:00+00:00",
        certification("primary", "product_title"),
    ),
    Cell(
        "primary",
        "extract_product",
        Validity.FAIL,
        f"failed: tea: {FAILURE}",
        certification("primary", "extract_product", (FAILURE,)),
    ),
    Cell(
        "gemma_chatml",
        "product_title",
        Validity.STALE,
        "stale: provider changed",
        certification("gemma_chatml", "product_title"),
    ),
    Cell(
        "gemma_chatml",
        "extract_product",
        Validity.EXPIRED,
        "expired at 2026-01-12T09:30:00+00:00",
        certification("gemma_chatml", "extract_product"),
    ),
    Cell("backup", "product_title", Validity.MISSING, "never certified"),
    Cell(
        "backup",
        "extract_product",
        Validity.FAIL,
        f"failed: tea: {AGREEMENT}",
        certification(
            "backup",
            "extract_product",
            (AGREEMENT, Failure(check="json", run="3/3", detail="[/b] is not markup either")),
        ),
    ),
    Cell(
        "hosted",
        "product_title",
        Validity.UNVERIFIED,
        "unverified: tea: ...",
        certification("hosted", "product_title", unverified=True),
    ),
    Cell(
        "hosted",
        "extract_product",
        Validity.PASS,
        "valid until 2026-01-12T09:30:00+00:00",
        certification("hosted", "extract_product", unverified=True, waivers=WAIVER),
    ),
    Cell(
        "strict",
        "extract_product",
        Validity.FAIL,
        f"failed: tea: {SCHEMA}",
        certification("strict", "extract_product", (SCHEMA, FAILURE)),
    ),
]


def test_matrix_matches_the_golden_file() -> None:
    text = render_matrix(CELLS, width=WIDTH)
    if os.environ.get("JOBROUTER_REGOLD") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_every_status_and_the_failing_check_are_shown() -> None:
    text = render_matrix(CELLS, width=WIDTH)
    for status in ("pass", "fail", "unverified", "stale", "expired", "missing"):
        assert status in text
    for head in (
        "fail: behaviour: contains",
        "fail: agreement, json",
        "unverified: rendering",
        "pass, waived: rendering unverified",
        "fail: schema, behaviour: contains",
    ):
        assert head in text
    assert "[name, price]" in text
    assert max(len(line) for line in text.splitlines()) <= WIDTH


def test_the_failing_checks_come_before_any_cut_text() -> None:
    """A long failure used to be cut at 70 characters with its check inside the cut part (the
    adapter's "provider error (rejected): ..." hid "schema"): now every failing check is named
    in full on the cell's first line, and only the detail below it is shortened."""
    by_provider = {(cell.provider, cell.contract): cell_text(cell) for cell in CELLS}
    head, detail = by_provider[("strict", "extract_product")]
    assert head == "fail: schema, behaviour: contains"
    assert detail.startswith("0/1 cases; tea: schema: run 1/3: answer does not match")
    assert len(detail) == 70 and detail.endswith("...")
    assert by_provider[("hosted", "product_title")][0] == "unverified: rendering"
    assert "no waiver" in by_provider[("hosted", "product_title")][1]
    assert by_provider[("hosted", "extract_product")] == (
        "pass, waived: rendering unverified",
        WAIVER["rendering"],
    )
    assert by_provider[("primary", "product_title")] == ("pass", "")
