"""Connecting to PostgreSQL and what asyncpg's failures mean to the store: which errors say
the database cannot be reached (or dropped us), which say it cannot serve now, which say it
cannot be opened, and how they become a `StoreError` naming the URL with its password masked.
Shared by the connector's pool (router/store/postgres.py) and its listener
(router/store/pg_listen.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import asyncpg

from jobrouter.errors import StoreError
from jobrouter.providers.redact import scrub

CONNECT_TIMEOUT_S = 10.0

# Errors that mean "the database cannot be reached or dropped us", as opposed to a statement
# that failed; only these are translated, everything else keeps its asyncpg type.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    # The server's FATAL arrived between two statements and the socket is not closed yet:
    # asyncpg is stuck consuming the error and refuses the next statement with this.
    asyncpg.InternalClientError,
)
# The database cannot serve now, though the connection may be fine: a command or an acquire
# that ran out of time (a stalled server), a full disk, no memory, a read-only server. They
# become a transient StoreError too (HTTP 503 with Retry-After), never an unexpected error.
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    *CONNECTION_ERRORS,
    TimeoutError,
    asyncpg.InsufficientResourcesError,
    asyncpg.ReadOnlySQLTransactionError,
    asyncpg.QueryCanceledError,
)
# At open every failure (bad database name, refused password, unreachable host) means the same.
OPEN_ERRORS: tuple[type[BaseException], ...] = (
    *CONNECTION_ERRORS,
    TimeoutError,
    ValueError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
)


@contextlib.contextmanager
def translated_errors(
    url: str, doing: str, errors: tuple[type[BaseException], ...]
) -> Iterator[None]:
    """Re-raise `errors` as StoreError (chained), naming the URL without its password."""
    try:
        yield
    except errors as exc:  # the driver's message may quote the URL it was given
        raise StoreError(f"{doing}: {type(exc).__name__}: {scrub(str(exc))}", url=url) from exc
