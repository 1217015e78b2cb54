"""Stores: pick the backend from the URL scheme; drivers are imported only when chosen."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from jobrouter.errors import StoreError

if TYPE_CHECKING:
    from jobrouter.store.sqlstore import SqlStore

__all__ = ["SqlStore", "check_database_url", "open_store"]


def __getattr__(name: str) -> Any:
    # The store's parts are imported when a store is opened, not when a module of this package
    # is: `config check` reads a database URL and a verdict's shape, and opens no store.
    if name == "SqlStore":
        from jobrouter.store.sqlstore import SqlStore

        return SqlStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


SCHEMES = ("sqlite", "postgresql", "postgres")


def check_database_url(url: str) -> None:
    """Refuse a URL whose scheme no backend reads: `sqllite:///x.db` would otherwise be taken
    for a plain SQLite path and quietly make a folder named `sqllite:`."""
    if "://" not in url:
        return  # a plain path to a SQLite file
    scheme = url.split("://", 1)[0]
    if scheme.lower() in SCHEMES:
        return
    close = difflib.get_close_matches(scheme.lower(), SCHEMES, n=1)
    hint = f" (did you mean {close[0]}://?)" if close else ""
    raise StoreError(
        f"unknown database URL scheme {scheme!r}{hint}; use sqlite:///relative.db, "
        "sqlite:////absolute.db or postgresql://user@host:port/db",
        url=url,
    )


async def open_store(
    url: str, *, command_timeout: float | None = None, acquire_timeout: float | None = None
) -> SqlStore:
    """`sqlite:///file.db` (default, embedded) or `postgresql://user@host:port/db`.
    The timeouts (seconds, PostgreSQL only; None: the connector's defaults) bound one statement
    and the wait for a pooled connection: see `[database]` in the configuration."""
    check_database_url(url)
    from jobrouter.store.sqlstore import SqlStore

    if url.startswith(("postgres://", "postgresql://")):
        try:
            from jobrouter.store.postgres import (
                ACQUIRE_TIMEOUT_S,
                COMMAND_TIMEOUT_S,
                PostgresConnector,
            )
        except ImportError as exc:
            raise StoreError(
                "PostgreSQL needs the extra: pip install 'jobrouter[postgres]'", url=url
            ) from exc
        return SqlStore(
            await PostgresConnector.open(
                url,
                command_timeout=command_timeout or COMMAND_TIMEOUT_S,
                acquire_timeout=acquire_timeout or ACQUIRE_TIMEOUT_S,
            )
        )
    from jobrouter.store.sqlite import SqliteConnector

    return SqlStore(await SqliteConnector.open(url))
