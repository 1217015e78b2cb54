"""Which index each named query of the SQLite store walks, and which index no query walks
(issue 28: every index on `jobs` is paid for by each insert and state change of a job).

    python -m tests.bench.plans [--table jobs]

Plans are SQLite's on a fresh file, as the store runs them: it keeps no statistics (no ANALYZE),
so its planner chooses by the query's shape alone, whatever the data. The listing's `{where}`
fragments are planned one filter at a time. PostgreSQL plans by statistics: see
tests/store/test_listing.py for how its choices are asked."""

from __future__ import annotations

import argparse
import asyncio
import re
import sqlite3
import tempfile
from collections import defaultdict
from pathlib import Path

from jobrouter.store import open_store
from jobrouter.store.connector import load_queries

LISTS = {"ids", "states", "owners", "rows"}  # JSON-array parameters


def statements() -> dict[str, str]:
    """Every named query, the listing's once per filter fragment."""
    queries = load_queries("sqlite")
    fragments = {name: sql for name, sql in queries.items() if name.startswith("list_jobs_")}
    out = {}
    for name, sql in queries.items():
        if name in fragments:
            continue
        if "{where}" not in sql:
            out[name] = sql
            continue
        out[name] = sql.replace("{where}", "")
        for fragment, text in fragments.items():
            out[f"{name} + {fragment}"] = sql.replace("{where}", text)
    return out


def plan(db: sqlite3.Connection, sql: str) -> list[str]:
    params = {p: "[]" if p in LISTS else None for p in re.findall(r":(\w+)", sql)}
    return [str(row[3]) for row in db.execute("EXPLAIN QUERY PLAN " + sql, params)]


async def main(table: str) -> None:
    path = Path(tempfile.mkdtemp(prefix="jobrouter-plans-")) / "plans.db"
    store = await open_store(f"sqlite:///{path}")
    await store.close()
    db = sqlite3.connect(path)
    indexes = [
        row[0]
        for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", (table,)
        )
    ]
    walked: dict[str, list[str]] = defaultdict(list)
    for name, sql in sorted(statements().items()):
        if not re.search(rf"\b{table}\b", sql):
            continue
        steps = plan(db, sql)
        print(f"{name}: {' | '.join(steps)}")
        for index in indexes:
            if any(re.search(rf"\b{index}\b", step) for step in steps):
                walked[index].append(name)
    print()
    for index in indexes:
        users = walked.get(index, [])
        print(f"{index}: {len(users)} queries" + (f" ({', '.join(users)})" if users else ""))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--table", default="jobs")
    asyncio.run(main(parser.parse_args().table))
