"""Every index on `jobs` is walked by some statement of the store (issue 28: each is paid for
by every job's insert and state change). SQLite only: it keeps no statistics, so its plans
are the query's shape alone and this reads them exactly (`python -m tests.bench.plans` prints
them); PostgreSQL plans by statistics, and tests/store/test_listing.py asks its choices."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from jobrouter.store import open_store
from tests.bench.plans import plan, statements

# Walked by no plan, and needed all the same: the constraint of I1 (ON CONFLICT and find_job).
CONSTRAINTS = {"sqlite_autoindex_jobs_2"}


async def test_no_index_on_jobs_is_upkeep_only(tmp_path: Path) -> None:
    """mutant: migration 0018 without its DROP INDEX of jobs_runnable (or jobs_finished):
    that index is walked by no query."""
    path = tmp_path / "plans.db"
    store = await open_store(f"sqlite:///{path}")
    await store.close()
    with sqlite3.connect(path) as db:
        indexes = {
            row[0]
            for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'"
            )
        }
        steps = [
            step
            for sql in statements().values()
            if re.search(r"\bjobs\b", sql)
            for step in plan(db, sql)
        ]
    walked = {index for index in indexes if any(re.search(rf"\b{index}\b", s) for s in steps)}
    assert indexes - walked - CONSTRAINTS == set()
    assert len(indexes) == 6  # the primary key, I1's, and four the listing and the waits walk
