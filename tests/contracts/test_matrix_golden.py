"""The certification matrix as `jobrouter contracts run | status` print it, against a golden file.

One cell of each status: pass, fail (naming its first failing check), stale, expired, missing.
The golden file was written once from this output after reading it; the comparison is exact.
To change the format on purpose, regenerate it with ``JOBROUTER_REGOLD=1`` and review the diff.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from contracts import CaseEvidence, Certification, RenderingEvidence
from router.certifier import Cell
from router.cli_contracts import render_matrix

GOLDEN = Path(__file__).with_name("golden") / "matrix.txt"
WIDTH = 100
CERTIFIED_AT = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)


def certification(provider: str, contract: str, failures: tuple[str, ...] = ()) -> Certification:
    case = CaseEvidence(name="tea", passed=not failures, rendering=RenderingEvidence(ok=True),
                        runs=3, failures=failures, agreement=1.0)  # fmt: skip
    return Certification(
        provider=provider, provider_fingerprint="p" * 64, contract=contract, contract_version=1,
        contract_fingerprint="sha256:" + "c" * 64, passed=not failures, cases=(case,),
        certified_at=CERTIFIED_AT, expires_at=CERTIFIED_AT + timedelta(days=7),
    )  # fmt: skip


FAILURE = 'run 2/3: expect contains at title: found "Gift set", expected to contain "tea"'
# Square brackets are text, not console markup: this line once lost "[name, price]".
AGREEMENT = "agreement: 1/3 runs agree on [name, price] (share 0.33 < min_agreement 0.67)"
CELLS = [
    Cell("primary", "product_title", "pass", "valid until 2026-01-12T09:30:00+00:00",
         certification("primary", "product_title")),
    Cell("primary", "extract_product", "fail", f"failed: tea: {FAILURE}",
         certification("primary", "extract_product", (FAILURE,))),
    Cell("gemma_chatml", "product_title", "stale", "stale: provider changed",
         certification("gemma_chatml", "product_title")),
    Cell("gemma_chatml", "extract_product", "expired", "expired at 2026-01-12T09:30:00+00:00",
         certification("gemma_chatml", "extract_product")),
    Cell("backup", "product_title", "missing", "never certified"),
    Cell("backup", "extract_product", "fail", f"failed: tea: {AGREEMENT}",
         certification("backup", "extract_product", (AGREEMENT, "[/b] is not markup either"))),
]  # fmt: skip


def test_matrix_matches_the_golden_file() -> None:
    text = render_matrix(CELLS, width=WIDTH)
    if os.environ.get("JOBROUTER_REGOLD") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_every_status_and_the_failing_check_are_shown() -> None:
    text = render_matrix(CELLS, width=WIDTH)
    for status in ("pass", "fail", "stale", "expired", "missing"):
        assert status in text
    flat = " ".join(text.split())
    assert "tea: run 2/3: expect contains at title" in flat
    assert "tea: agreement: 1/3 runs agree on [name, price]" in flat
    assert max(len(line) for line in text.splitlines()) <= WIDTH
