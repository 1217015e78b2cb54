"""SQLite connector: one WAL file, one writer connection, one reader connection.

Settings and why:
- `journal_mode=WAL`: readers never block the writer, and several processes share one file.
- `synchronous=FULL`: a job the router accepted survives a power cut, not only a process crash
  (NORMAL in WAL may lose the last commits on power loss); durability is the product.
- `busy_timeout`: a second router process on the same file waits for the write lock instead of
  failing at once.
- Write transactions use `BEGIN IMMEDIATE` so the write lock is taken up front: a read-then-write
  transaction can never deadlock on a lock upgrade.

Why not aiosqlite (measured, docs/benchmarks.md): aiosqlite sends every statement through its
own thread, about 180 us per statement on these machines, and a job costs about 24 statements;
it cannot run a transaction in one hop. Only two steps of a write transaction can block: taking
the write lock (`BEGIN IMMEDIATE` may wait for another process) and `COMMIT` (fsync). Those run
on a worker thread; the statements between them run inline, in microseconds, because the write
lock is already held and SQLite has nothing else to wait for. Reads run inline on the reader
connection: WAL readers do not wait for writers. Statements of one process are serialized by an
asyncio lock (one writer connection must not interleave two transactions).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from router.errors import StoreError
from router.store.connector import ConnectorStats, Params, Row, load_migrations, load_queries

T = TypeVar("T")
BUSY_TIMEOUT_MS = 10_000
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


class _SqliteTx:
    """Statements on a connection the caller holds exclusively (run inline: see the docstring)."""

    def __init__(self, conn: sqlite3.Connection, stats: ConnectorStats) -> None:
        self._conn = conn
        self._stats = stats

    async def execute(self, query: str, params: Params) -> int:
        self._stats.round_trips += 1
        cursor = self._conn.execute(query, params)
        count = cursor.rowcount
        cursor.close()
        return count

    async def fetchone(self, query: str, params: Params) -> Row | None:
        rows = await self.fetchall(query, params)
        return rows[0] if rows else None

    async def fetchall(self, query: str, params: Params) -> list[Row]:
        self._stats.round_trips += 1
        return [dict(row) for row in self._conn.execute(query, params).fetchall()]


class SqliteConnector:
    dialect = "sqlite"

    def __init__(self, url: str, writer: sqlite3.Connection, reader: sqlite3.Connection):
        self.url = url
        self.queries: Mapping[str, str] = load_queries(self.dialect)
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()
        self.stats = ConnectorStats()
        self._read_tx = _SqliteTx(reader, self.stats)

    @classmethod
    async def open(cls, url: str) -> SqliteConnector:
        path = sqlite_path(url)
        if str(path) != ":memory:" and not path.parent.exists():
            raise StoreError(f"folder {path.parent} does not exist; create it first", url=url)
        try:
            writer = await asyncio.to_thread(_connect, path)
            await asyncio.to_thread(_migrate, writer)
            reader = await asyncio.to_thread(_connect, path)
        except Exception as exc:  # sqlite3.Error and OSError alike: name the file
            raise StoreError(f"cannot open SQLite database {path}: {exc}", url=url) from exc
        return cls(url, writer, reader)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[_SqliteTx]:
        async with self._write_lock:
            self.stats.write_transactions += 1
            self.stats.round_trips += 2  # BEGIN and COMMIT
            await _in_thread(lambda: self._writer.execute("BEGIN IMMEDIATE"),
                             undo=self._writer.rollback)
            try:
                yield _SqliteTx(self._writer, self.stats)
            except BaseException:
                self._writer.rollback()
                raise
            await _in_thread(self._writer.commit)

    async def fetchone(self, query: str, params: Params) -> Row | None:
        return await self._read_tx.fetchone(query, params)

    async def fetchall(self, query: str, params: Params) -> list[Row]:
        return await self._read_tx.fetchall(query, params)

    async def close(self) -> None:
        async with self._write_lock:
            self._reader.close()
            self._writer.close()


async def _in_thread(step: Callable[[], T], undo: Callable[[], object] | None = None) -> T:
    """Run a blocking step on a worker thread; if the caller is cancelled meanwhile, let the
    step finish (and undo it) before passing the cancellation on, so the connection is never
    used by two threads at once nor left inside a half-open transaction."""
    task = asyncio.ensure_future(asyncio.to_thread(step))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await task
            if undo is not None:
                undo()
        raise


def _connect(path: Path) -> sqlite3.Connection:
    # check_same_thread off: BEGIN and COMMIT run on a worker thread, the rest inline; the
    # write lock (and the reader being used only inline) keeps every use one at a time.
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    for pragma in PRAGMAS:
        conn.execute(pragma)
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
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
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)", (number, name, time.time())
            )
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def _statements(sql: str) -> list[str]:
    # executescript() would commit our transaction; migrations hold no ';' inside literals.
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [part.strip() for part in body.split(";") if part.strip()]
