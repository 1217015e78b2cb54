"""Store fixtures, parametrized by backend.

To run the store suite on another backend, add one `pytest.param(factory, id=...)` to
`BACKENDS`: a factory takes a fresh temporary folder and returns the URL of an empty database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from router.store import SqlStore, open_store
from tests.store.pg import drop_databases, postgres_url, recycle

UrlFactory = Callable[[Path], str]


def sqlite_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'jobs.db'}"


BACKENDS = [
    pytest.param(sqlite_url, id="sqlite"),
    pytest.param(postgres_url, id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh, empty database of each backend."""
    factory: UrlFactory = request.param
    url = factory(tmp_path)
    yield url
    recycle(url)  # PostgreSQL: emptied for the next test (SQLite's file lives in tmp_path)


@pytest.fixture(scope="session", autouse=True)
def _drop_test_databases() -> Iterator[None]:
    """Databases made by a factory outside `db_url` (the state machine) go at session end."""
    yield
    drop_databases()


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SqlStore]:
    opened = await open_store(db_url)
    try:
        yield opened
    finally:
        await opened.close()
