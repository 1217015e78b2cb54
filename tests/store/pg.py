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


def postgres_url(folder: Path) -> str:
    """Backend factory of conftest.BACKENDS: a fresh database that lives as long as `folder`."""
    drop_databases([url for url, made_for in _created.items() if not made_for.exists()])
    url = _run(create_database())
    _created[url] = folder
    return url


def drop_databases(urls: Iterable[str] | None = None) -> None:
    """Drop the given databases made by `postgres_url` (others are ignored), or all of them."""
    for url in list(_created if urls is None else urls):
        if url in _created:
            del _created[url]
            _run(drop_database(url))
