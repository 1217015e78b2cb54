"""SQLite connector (aiosqlite): one WAL file, one writer connection, one reader connection.

Settings and why:
- `journal_mode=WAL`: readers never block the writer, and several processes share one file.
- `synchronous=FULL`: a job the router accepted survives a power cut, not only a process crash
  (NORMAL in WAL may lose the last commits on power loss); durability is the product.
- `busy_timeout`: a second router process on the same file waits for the write lock instead of
  failing at once.
- Write transactions use `BEGIN IMMEDIATE` so the write lock is taken up front: a read-then-write
  transaction can never deadlock on a lock upgrade.
Statements of one process are serialized by an asyncio lock, because one aiosqlite connection
would otherwise interleave the statements of concurrent transactions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite

from router.errors import StoreError
from router.store.connector import ConnectorStats, Params, Row, load_migrations, load_queries

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
    def __init__(self, conn: aiosqlite.Connection, stats: ConnectorStats) -> None:
        self._conn = conn
        self._stats = stats

    async def execute(self, query: str, params: Params) -> int:
        self._stats.round_trips += 1
        cursor = await self._conn.execute(query, params)
        count = cursor.rowcount
        await cursor.close()
        return count

    async def fetchone(self, query: str, params: Params) -> Row | None:
        rows = await self.fetchall(query, params)
        return rows[0] if rows else None

    async def fetchall(self, query: str, params: Params) -> list[Row]:
        self._stats.round_trips += 1
        rows = await self._conn.execute_fetchall(query, params)
        return [dict(row) for row in rows]


class SqliteConnector:
    dialect = "sqlite"

    def __init__(self, url: str, writer: aiosqlite.Connection, reader: aiosqlite.Connection):
        self.url = url
        self.queries: Mapping[str, str] = load_queries(self.dialect)
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()
        self._read_lock = asyncio.Lock()
        self.stats = ConnectorStats()
        self._read_tx = _SqliteTx(reader, self.stats)

    @classmethod
    async def open(cls, url: str) -> SqliteConnector:
        path = sqlite_path(url)
        if str(path) != ":memory:" and not path.parent.exists():
            raise StoreError(f"folder {path.parent} does not exist; create it first", url=url)
        try:
            writer = await _connect(path)
            await _migrate(writer)
            reader = await _connect(path)
        except Exception as exc:  # sqlite3.Error and OSError alike: name the file
            raise StoreError(f"cannot open SQLite database {path}: {exc}", url=url) from exc
        return cls(url, writer, reader)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[_SqliteTx]:
        async with self._write_lock:
            self.stats.write_transactions += 1
            self.stats.round_trips += 2  # BEGIN and COMMIT
            await self._writer.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteTx(self._writer, self.stats)
            except BaseException:
                await self._writer.rollback()
                raise
            await self._writer.commit()

    async def fetchone(self, query: str, params: Params) -> Row | None:
        async with self._read_lock:
            return await self._read_tx.fetchone(query, params)

    async def fetchall(self, query: str, params: Params) -> list[Row]:
        async with self._read_lock:
            return await self._read_tx.fetchall(query, params)

    async def close(self) -> None:
        await self._reader.close()
        await self._writer.close()


async def _connect(path: Path) -> aiosqlite.Connection:
    conn = await aiosqlite.connect(str(path), isolation_level=None)
    conn.row_factory = aiosqlite.Row
    for pragma in PRAGMAS:
        await conn.execute(pragma)
    return conn


async def _migrate(conn: aiosqlite.Connection) -> None:
    """Apply the numbered migrations not yet recorded, each in its own transaction."""
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    await conn.execute("BEGIN IMMEDIATE")
    try:
        rows = await conn.execute_fetchall("SELECT version FROM schema_migrations")
        applied = {int(row[0]) for row in rows}
        for number, name, sql in load_migrations("sqlite"):
            if number in applied:
                continue
            for statement in _statements(sql):
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)", (number, name, time.time())
            )
    except BaseException:
        await conn.rollback()
        raise
    await conn.commit()


def _statements(sql: str) -> list[str]:
    # executescript() would commit our transaction; migrations hold no ';' inside literals.
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [part.strip() for part in body.split(";") if part.strip()]
