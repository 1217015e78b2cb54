"""`jobrouter demo`, the README's main job, run as a new user runs it: a subprocess, offline
(replaying cassettes/), on a fresh SQLite file. The story's outcomes are checked in the
database it leaves, not only in what it prints."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_demo_tells_the_whole_story_offline(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    done = subprocess.run(
        [sys.executable, "-m", "jobrouter", "demo", "--database", f"sqlite:///{db}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "COLUMNS": "120",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_OFFLINE_MODE": "true",
        },
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "IdempotencyConflict" in out
    assert "certification matrix" in out
    flat = " ".join(out.split())
    assert "certifications: REPLAYED" in flat and "job calls: REPLAYED" in flat
    assert "LIVE" not in out  # nothing ran live, and the screen does not say it did
    # the conclusion, derived from the matrix: the llama-2 server behaves, but fails rendering;
    # the primary's server reached without litellm (transport "openai") is certified on its own
    assert (
        "product_title: certified primary, backup, primary_openai; "
        "refused gemma_chatml (failed rendering)" in flat
    )
    assert "gemma_llama2 (failed rendering)" in flat

    rows = (
        sqlite3.connect(db)
        .execute(
            "SELECT j.idempotency_key, j.state, j.version, a.seq, a.provider, a.state, "
            "a.id = j.winner_attempt_id FROM jobs j JOIN attempts a ON a.job_id = j.id "
            "ORDER BY j.idempotency_key, a.seq"
        )
        .fetchall()
    )
    story = {}
    for key, job_state, _, seq, provider, state, winner in rows:
        story.setdefault(key, [job_state])
        story[key].append((seq, provider, state, bool(winner)))
    # 2-3: one job for the double submit; the primary answered
    assert story["order-1001-title"] == ["succeeded", (1, "primary", "succeeded", True)]
    # 5 + 7: the silent primary is unknown, never failed; gemma_chatml (uncertified) is never
    # called; backup wins; the primary's late answer, reported later, loses the CAS
    assert story["order-1002-title"] == [
        "succeeded",
        (1, "primary", "lost", False),
        (2, "backup", "succeeded", True),
    ]
    # 6: hedging: the slow primary's attempt is cancelled, the backup wins
    assert story["order-1003-title"] == [
        "succeeded",
        (1, "primary", "cancelled", False),
        (2, "backup", "succeeded", True),
    ]
    skipped = (
        sqlite3.connect(db)
        .execute("SELECT data FROM job_events WHERE kind = 'provider.skipped'")
        .fetchall()
    )
    assert any("gemma_chatml" in data and "certif" in data for (data,) in skipped)


def test_the_conclusion_is_derived_from_the_matrix() -> None:
    """The demo used to print a fixed conclusion whatever the run showed."""
    from jobrouter.demo import conclusion, what_runs
    from tests.contracts.test_matrix_golden import CELLS

    assert conclusion(CELLS) == [
        "extract_product: certified hosted; refused primary (failed behaviour: contains), "
        "gemma_chatml (expired), backup (failed agreement, json), strict (failed schema, "
        "behaviour: contains)",
        "product_title: certified primary; refused gemma_chatml (stale), backup (missing), "
        "hosted (unverified rendering)",
    ]
    assert conclusion([c for c in CELLS if c.provider != "primary"])[1].startswith(
        "product_title: NO certified provider, its jobs would not run"
    )
    assert "job calls: LIVE" in what_runs(record=True)
    assert "certifications: REPLAYED" in what_runs(record=True)
    assert "job calls: REPLAYED" in what_runs(record=False)
