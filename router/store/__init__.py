"""Stores: pick the backend from the URL scheme; drivers are imported only when chosen."""

from __future__ import annotations

from router.errors import StoreError
from router.store.sql import SqlStore

__all__ = ["SqlStore", "open_store"]


async def open_store(url: str) -> SqlStore:
    """`sqlite:///file.db` (default, embedded) or `postgresql://user@host:port/db`."""
    if url.startswith(("postgres://", "postgresql://")):
        try:
            from router.store.postgres import PostgresConnector
        except ImportError as exc:
            raise StoreError(
                "PostgreSQL needs the extra: pip install 'jobrouter[postgres]'", url=url
            ) from exc
        return SqlStore(await PostgresConnector.open(url))
    from router.store.sqlite import SqliteConnector

    return SqlStore(await SqliteConnector.open(url))
