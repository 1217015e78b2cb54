"""A SQLite database file as the connector (router/store/sqlite.py) opens it: its URL, the
settings of each connection, what SQLite's errors mean, the damage check at open, and the
migrations.

Settings and why:
- `journal_mode=WAL`: readers never block the writer, and several processes share one file.
- `synchronous=FULL`: a job the router accepted survives a power cut, not only a process crash
  (NORMAL in WAL may lose the last commits on power loss); durability is the product.
- `busy_timeout`: a second router process on the same file waits for the write lock instead of
  failing at once.

Errors: SQLite result codes that mean "the database cannot be used now" (busy, locked, read-only,
I/O error, disk full, cannot open) become a transient `StoreError`, so every edge answers
"unavailable, retry" (HTTP 503) rather than "unexpected"; a damaged file (`SQLITE_CORRUPT`,
`SQLITE_NOTADB`) is a `StoreError` that is not transient and names the command to inspect it.
A constraint violation keeps its type: the store handles it (idempotency keys). At open,
`PRAGMA quick_check` runs first: a damaged index answers lookups with nothing, and a resubmitted
key would then create a second job, so a damaged file is refused before any use.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from jobrouter.errors import StoreError
from jobrouter.store.connector import load_migrations

BUSY_TIMEOUT_MS = 10_000
# Primary result codes (sqlite_errorcode & 0xff): the database cannot be used right now ...
UNAVAILABLE_CODES = {
    5: "busy",
    6: "locked",
    7: "out of memory",
    8: "read-only",
    10: "I/O error",
    13: "disk full",
    14: "cannot open",
    15: "lock protocol",
}
# ... or not at all until someone repairs the file.
DAMAGED_CODES = {11: "SQLITE_CORRUPT", 26: "SQLITE_NOTADB"}
QUICK_CHECK_LINES = 5  # problems quick_check lists at most (it stops there: faster)
PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
    "PRAGMA foreign_keys=ON",
)


def sqlite_path(url: str) -> Path:
    """`sqlite:///rel/path.db`, `sqlite:////abs/path.db`, or a plain path."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///"))
    if url.startswith("sqlite:"):
        raise StoreError("write sqlite URLs as sqlite:///relative.db or sqlite:////abs.db", url=url)
    return Path(url)


def connect(path: Path) -> sqlite3.Connection:
    # check_same_thread off: BEGIN and COMMIT run on a worker thread, the rest inline; the
    # write lock (and the reader being used only inline) keeps every use one at a time.
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    for pragma in PRAGMAS:
        conn.execute(pragma)
    return conn


@contextlib.contextmanager
def translated_errors(url: str, path: Path) -> Iterator[None]:
    """SQLite errors about the database itself as `StoreError` (see the module docstring)."""
    try:
        yield
    except sqlite3.IntegrityError:
        raise
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        if primary in UNAVAILABLE_CODES:
            raise StoreError(
                f"SQLite database {UNAVAILABLE_CODES[primary]}: {exc}", url=url
            ) from exc
        if primary in DAMAGED_CODES:
            raise StoreError(
                damaged(path, f"{DAMAGED_CODES[primary]}: {exc}"), url=url, transient=False
            ) from exc
        raise


def damaged(path: Path, detail: str) -> str:
    return (
        f"the SQLite database {path} is damaged ({detail}); it is not used, because a "
        "damaged index answers lookups with nothing (a resubmitted idempotency key would "
        f"create a second job). Inspect it with: sqlite3 '{path}' 'PRAGMA integrity_check'; "
        f"then restore a backup, or recover what is readable: sqlite3 '{path}' .recover"
    )


def quick_check(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a damaged file (`PRAGMA quick_check`: every page and index entry is well-formed;
    it skips only the cross-check of index contents against their tables)."""
    found = [str(row[0]) for row in conn.execute(f"PRAGMA quick_check({QUICK_CHECK_LINES})")]
    if found != ["ok"]:
        raise StoreError(damaged(path, "PRAGMA quick_check: " + "; ".join(found)), transient=False)


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the numbered migrations not yet recorded, in one transaction."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    conn.execute("BEGIN IMMEDIATE")
    try:
        applied = {int(row[0]) for row in conn.execute("SELECT version FROM schema_migrations")}
        for number, name, sql in load_migrations("sqlite"):
            if number in applied:
                continue
            for statement in statements(sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)", (number, name, time.time())
            )
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def statements(sql: str) -> list[str]:
    # executescript() would commit our transaction; migrations hold no ';' inside literals.
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [part.strip() for part in body.split(";") if part.strip()]
