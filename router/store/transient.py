"""Which store errors are transient: the same write, tried again a little later, may succeed.

A lost connection or COMMIT acknowledgement (`StoreError` from either connector), a busy or
locked SQLite file, a failed disk write, PostgreSQL shedding connections or aborting a
transaction for a serialisation conflict or a deadlock. A statement the database refuses
(a constraint, a syntax error) is not: it fails the same way every time.

Driver types are looked up in `sys.modules`: a driver never imported cannot have raised.
"""

from __future__ import annotations

import sqlite3
import sys

from jobrouter.errors import StoreError

_ASYNCPG_TRANSIENT = (
    "PostgresConnectionError",
    "ConnectionDoesNotExistError",
    "InterfaceError",
    "SerializationError",
    "DeadlockDetectedError",
    "CannotConnectNowError",
    "TooManyConnectionsError",
    "AdminShutdownError",
    "CrashShutdownError",
)
_SQLITE_TRANSIENT_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_INTERRUPT,
        sqlite3.SQLITE_PROTOCOL,
    }
)


def _asyncpg_types() -> tuple[type[BaseException], ...]:
    module = sys.modules.get("asyncpg")
    if module is None:
        return ()
    found = (getattr(module, name, None) for name in _ASYNCPG_TRANSIENT)
    return tuple(t for t in found if isinstance(t, type) and issubclass(t, BaseException))


def is_transient(exc: BaseException) -> bool:
    """Whether the failed store operation may succeed if tried again."""
    if isinstance(exc, StoreError | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        code = getattr(exc, "sqlite_errorcode", None)
        return code is not None and (code & 0xFF) in _SQLITE_TRANSIENT_CODES
    types = _asyncpg_types()
    return bool(types) and isinstance(exc, types)
