"""The database backends every suite runs on, and a fresh database of each as fixtures.

To run the tests on another backend, add one `pytest.param(factory, id=...)` to `BACKENDS`: a
factory takes a fresh temporary folder and returns the URL of an empty database.

The fixtures, for tests outside tests/store (whose conftest has a `db_url` of its own that
recycles PostgreSQL databases between store tests, and uses `store` from here); a test module
imports the ones it uses by name:
- `db_url`: SQLite in the test's folder, or a PostgreSQL database of its own, dropped after
  the test; `store`: a store opened on the `db_url` of the requesting test.
- `empty_url`: a database with no schema at all (PostgreSQL: made for the test, dropped after
  it; the store suite's `db_url` may hand out a migrated one), for tests that lay out an old
  schema themselves or leave the migrations to a router process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from jobrouter.store import SqlStore, open_store
from tests.store.pg import drop_databases, fresh_database, postgres_url

UrlFactory = Callable[[Path], str]


def sqlite_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'jobs.db'}"


BACKENDS = [
    pytest.param(sqlite_url, id="sqlite"),
    pytest.param(postgres_url, id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    factory: UrlFactory = request.param
    url = factory(tmp_path)
    yield url
    drop_databases([url])


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SqlStore]:
    opened = await open_store(db_url)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
        return
    async with fresh_database() as url:
        yield url
