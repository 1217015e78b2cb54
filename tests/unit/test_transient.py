"""Which store errors are transient (router/store/transient.py), each kind on real errors: the
ones SQLite and asyncpg raise themselves, not look-alikes. A transient error is tried again
(router/persist.py) and keeps an answer in hand on its attempt; one that is not fails the same
way every time and is raised. The mutmut run of this module (docs/testing.md) left these kinds
unexamined: the selection runs on SQLite, so no PostgreSQL error ever reached it."""

from __future__ import annotations

import sqlite3
import sys
import types
from pathlib import Path

import asyncpg
import pytest

from jobrouter.errors import StoreError
from jobrouter.store import transient
from jobrouter.store.transient import is_transient


def sqlite_error(
    path: Path, statement: str, *, hold_lock: bool = False
) -> sqlite3.OperationalError:
    """The error SQLite raises for `statement` (with another connection holding the write
    lock first, if asked)."""
    first = sqlite3.connect(str(path), isolation_level=None)
    second = sqlite3.connect(str(path), isolation_level=None)
    second.execute("PRAGMA busy_timeout=0")
    try:
        if hold_lock:
            first.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as caught:
            second.execute(statement)
        return caught.value
    finally:
        first.close()
        second.close()


def test_a_busy_sqlite_file_is_transient_and_a_refused_statement_is_not(tmp_path: Path) -> None:
    """SQLITE_BUSY may pass; a statement SQLite refuses (SQLITE_ERROR, a missing table) fails
    the same way every time, so it is raised, not tried again.
    Mutant `is_transient` 10 (`code is not None or ...`: every coded error transient) fails
    the second assertion."""
    busy = sqlite_error(tmp_path / "a.db", "BEGIN IMMEDIATE", hold_lock=True)
    refused = sqlite_error(tmp_path / "a.db", "SELECT * FROM no_such_table")
    assert busy.sqlite_errorcode == sqlite3.SQLITE_BUSY
    assert refused.sqlite_errorcode == sqlite3.SQLITE_ERROR
    assert is_transient(busy)
    assert not is_transient(refused)


def test_an_operational_error_without_a_code_is_not_transient() -> None:
    """An `OperationalError` SQLite did not raise (a wrapper's, a test's) has no
    `sqlite_errorcode` at all: it is read as not transient, not an `AttributeError`.
    Mutant `is_transient` 7 (`getattr(exc, "sqlite_errorcode")` without its default) fails."""
    error = sqlite3.OperationalError("made by hand")
    assert not hasattr(error, "sqlite_errorcode")
    assert not is_transient(error)


@pytest.mark.parametrize(
    "error",
    [
        StoreError("the COMMIT acknowledgement was lost"),
        ConnectionError("connection reset"),
        TimeoutError("the database did not answer"),
    ],
    ids=["StoreError", "ConnectionError", "TimeoutError"],
)
def test_a_lost_connection_or_acknowledgement_is_transient(error: Exception) -> None:
    """Mutant `is_transient` 1 (`return False` for these; mutmut saw it time out) fails each
    case."""
    assert is_transient(error)


@pytest.mark.parametrize("name", transient._ASYNCPG_TRANSIENT)
def test_each_transient_postgresql_error_is_transient(name: str) -> None:
    """PostgreSQL shedding connections, a lost connection, a serialisation conflict, a deadlock:
    each of asyncpg's types for them is transient once asyncpg is imported (it is here).
    Mutants `_asyncpg_types` 1-5 and 7 (the module not found or not read) and `is_transient`
    15, 17 (the types never consulted) fail every case."""
    error_type = getattr(asyncpg, name)
    assert is_transient(error_type("lost"))


def test_a_postgresql_error_that_repeats_is_not_transient() -> None:
    """A constraint PostgreSQL enforces fails the same way every time; so does a bug.
    Mutant `is_transient` 16 (`bool(types) or isinstance(...)`: anything transient once
    asyncpg is imported) fails."""
    assert not is_transient(asyncpg.UniqueViolationError("duplicate key"))
    assert not is_transient(ValueError("a bug"))


def test_a_driver_version_lacking_a_type_is_read_without_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An asyncpg that lacks some of the names, or has one that is not an exception type,
    still has its other transient types read, and nothing raises.
    Mutants `_asyncpg_types` 11 (`getattr` without its default: AttributeError) and 13
    (`isinstance(t, type) or issubclass(...)`: TypeError on a non-type) fail."""

    class ConnectionDoesNotExistError(Exception):
        pass

    driver = types.ModuleType("asyncpg")
    driver.ConnectionDoesNotExistError = ConnectionDoesNotExistError  # type: ignore[attr-defined]
    driver.SerializationError = "not a type"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "asyncpg", driver)
    assert is_transient(ConnectionDoesNotExistError("gone"))
    assert not is_transient(ValueError("a bug"))
