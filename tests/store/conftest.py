"""Store fixtures, parametrized by backend (`BACKENDS` in tests/support/backends.py, where
another backend is added); `store` is the one of tests/support/backends.py, opened on this
folder's `db_url`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.pg import drop_databases, recycle
from tests.support.backends import BACKENDS, UrlFactory
from tests.support.backends import store as store  # a fixture, used by name


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
