"""PostgreSQL for the store tests: every test gets a fresh database, dropped (WITH (FORCE)) when
it is done: `db_url` drops its test's database at teardown; a database made for a folder that
is gone (the state machine removes its folder per example) is dropped by the next call of the
factory; the session drops the rest. The server is `JOBROUTER_TEST_PG` (default: the
development and CI server, trust auth). A server that is down fails the test with a message;
it is never skipped (`.ci/run` starts PostgreSQL; deselect with `-m "not postgres"` where
there is none).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

ADMIN_URL = os.environ.get("JOBROUTER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
T = TypeVar("T")
_created: dict[str, Path] = {}  # made by `postgres_url`, not dropped yet: url -> its folder
_free: list[str] = []  # given back by `recycle`, to be emptied and handed out again


def database_url(name: str) -> str:
    """The server's URL with another database."""
    parts = urlsplit(ADMIN_URL)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


async def _admin() -> asyncpg.Connection[asyncpg.Record]:
    try:
        return await asyncpg.connect(ADMIN_URL, timeout=10)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {ADMIN_URL} ({type(exc).__name__}: {exc}). The store "
            "suite runs on PostgreSQL too: start it (.ci/run does), point JOBROUTER_TEST_PG at "
            "another server, or deselect these tests with -m 'not postgres'.",
            pytrace=False,
        )


async def create_database() -> str:
    name = f"jobrouter_test_{uuid.uuid4().hex[:16]}"
    admin = await _admin()
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        # Tests need no durability across a power cut; waiting for each commit's fsync only
        # makes them slow. Visibility, locking and isolation are unchanged.
        await admin.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    finally:
        await admin.close()
    return database_url(name)


async def drop_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    admin = await _admin()
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    url = await create_database()
    try:
        yield url
    finally:
        await drop_database(url)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    # Sync fixtures may run while the test's event loop is current: use a loop of our own.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


# Every table emptied in one statement; the schema and its migrations stay.
EMPTY_TABLES = """
    DO $$ BEGIN
      EXECUTE (SELECT 'TRUNCATE ' || string_agg(quote_ident(tablename), ', ') || ' CASCADE'
               FROM pg_tables WHERE schemaname = current_schema()
               AND tablename <> 'schema_migrations');
    END $$"""


async def empty_database(url: str) -> None:
    """Make a used test database empty again: its leftover sessions ended (a leaked connection
    would hold locks), every table truncated."""
    name = urlsplit(url).path.lstrip("/")
    admin = await _admin()
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )
    finally:
        await admin.close()
    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute(EMPTY_TABLES)
    finally:
        await conn.close()


def postgres_url(folder: Path) -> str:
    """Backend factory of conftest.BACKENDS: an empty database that lives as long as `folder`.
    A database given back by `recycle` is emptied and handed out again: CREATE and DROP
    DATABASE cost a second or two each on a busy machine, emptying one a fraction of that."""
    drop_databases([url for url, made_for in _created.items() if not made_for.exists()])
    if _free:
        url = _free.pop()
        _run(empty_database(url))
    else:
        url = _run(create_database())
    _created[url] = folder
    return url


def recycle(url: str) -> None:
    """A test is done with this database (its stores closed): keep it for the next test."""
    if url in _created:
        del _created[url]
        _free.append(url)


def drop_databases(urls: Iterable[str] | None = None) -> None:
    """Drop the given databases made by `postgres_url` (others are ignored), or all of them
    (recycled ones included)."""
    if urls is None:
        targets = [*_created, *_free]
        _created.clear()
        _free.clear()
    else:
        targets = [url for url in urls if url in _created]
        for url in targets:
            del _created[url]
    for url in targets:
        _run(drop_database(url))
