"""The narrow storage seam: a backend opens a connection, runs named queries, gives write
transactions and the lock a leader is elected with (`LeaderLock`). All domain logic lives in
the stores `jobrouter.store.sqlstore.SqlStore` holds (one per consumer: jobstore.py, outbox.py,
circuits.py, certifications.py, tokens.py; their parts in files named for what they hold),
written once over this seam; the per-dialect files only connect, translate parameters, migrate
and hand out their lock, and the query loader here writes out the one spelling the dialects
differ in (a JSON list read as rows).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol, runtime_checkable

from jobrouter.errors import InvalidText

Row = dict[str, Any]
Params = Mapping[str, Any]

log = logging.getLogger("jobrouter.store")
_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
# A list travels as one JSON-array text parameter (the same Python value on every backend);
# `{json_list(:name)}` in a query is the statement that reads it as rows, in each dialect's words.
_JSON_LIST = re.compile(r"\{json_list\(:(\w+)\)\}")
JSON_LIST_ROWS = {
    "sqlite": "SELECT value FROM json_each(:{name})",
    "postgres": "SELECT json_array_elements_text(CAST(:{name} AS json))",
}


@dataclass
class ConnectorStats:
    """Round trips to the database (statements, BEGIN and COMMIT included), logical write
    transactions (`Connector.write()` blocks) and physical commits, counted by every connector:
    the benchmark reports them per job. Commits are fewer than write transactions where a
    connector groups several write transactions into one commit (SQLite)."""

    round_trips: int = 0
    write_transactions: int = 0
    commits: int = 0


class Tx(Protocol):
    """One open write transaction."""

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Call `callback()` once this transaction is committed, even when the caller has been
        cancelled while waiting for the COMMIT (and never when it is not committed). For work
        that must follow a commit whoever waits for it: handing a new job to a worker."""
        ...

    async def execute(self, query: str, params: Params) -> int: ...

    async def fetchone(self, query: str, params: Params) -> Row | None: ...

    async def fetchall(self, query: str, params: Params) -> list[Row]: ...


class Connector(Protocol):
    url: str
    dialect: str
    queries: Mapping[str, str]
    stats: ConnectorStats

    def write(self) -> AbstractAsyncContextManager[Tx]:
        """A write transaction: committed on clean exit, rolled back on an exception."""
        ...

    async def fetchone(self, query: str, params: Params) -> Row | None: ...

    async def fetchall(self, query: str, params: Params) -> list[Row]: ...

    async def fetchall_aside(self, query: str, params: Params) -> list[Row]:
        """A read that may take long (the job listing and its counts): it must not hold up
        the event loop meanwhile, where the job hot path, workers and lease renewals run.
        SQLite runs it on a thread with its own connection; asyncpg never blocks the loop."""
        ...

    def leader_lock(self, worker_id: str, *, heartbeat_s: float) -> LeaderLock:
        """The lock this process campaigns for leadership with (router/leader.py), as the
        backend has one: PostgreSQL an advisory lock bound to a lease (leader_lock.py), SQLite
        this process alone."""
        ...

    async def close(self) -> None: ...


class LeaderLock(Protocol):
    """What a leader is elected with: one backend's exclusive, session-bound lock, and the
    lease that bounds it in time."""

    @property
    def lease_s(self) -> float | None:
        """How long a renewal holds (None: for ever, nobody takes over)."""
        ...

    @property
    def retry_in(self) -> float | None:
        """After a failed try: seconds until the holder's lease expires (None: unknown)."""
        ...

    async def try_acquire(self) -> bool:
        """Take the lock (and a new term of its lease) if free; True when this process holds
        it after the call."""
        ...

    async def check(self) -> None:
        """Renew the lease; raise when it is lost or may be (the session no longer answers)."""
        ...

    async def release(self) -> None:
        """Let the lock go (drop the session); safe to call when not held."""
        ...

    async def holder(self) -> str | None:
        """The worker id of the process that holds the lock, as the database sees it."""
        ...

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Call `callback()` as soon as the session holding the lock is seen to end."""
        ...


@runtime_checkable
class ChangeFeed(Protocol):
    """Optional for a connector: it hears the events other processes commit (PostgreSQL
    LISTEN/NOTIFY). Without it, other processes' changes are seen by polling."""

    def on_change(self, callback: Callable[[str], None]) -> None:
        """Call `callback(job_id)` after any process commits an event of that job, once this
        process follows events. `callback("")` when changes may have been missed (the feed
        was down): every watcher reads again."""
        ...

    async def follow_events(self) -> None:
        """Hear every event of any job from now on, and for the rest of this process: each
        is a notification for the database to send and this process to read, so it begins
        at the first `Router.watch`, not before. Events committed before it are not heard."""
        ...


@runtime_checkable
class LoadAware(Protocol):
    """Optional for a connector: it commits differently depending on how many jobs the
    process has in flight (SQLite: inline with one, grouped on a thread with more)."""

    jobs_in_flight: Callable[[], int]


async def until_done(task: asyncio.Future[Any]) -> bool:
    """Wait for `task` to end without cancelling it, through any number of cancellations of
    the caller; True when the caller was cancelled meanwhile (pass that on once the task's
    outcome is dealt with). A BEGIN or COMMIT must end before its connection is used again."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


def check_params(params: Params) -> Params:
    """Refuse a NUL character in any text parameter, on every backend alike (`InvalidText`).
    PostgreSQL cannot store one (its driver fails with a DataError deep in a transaction);
    SQLite would store it, making a key that works on one backend and not the other. JSON
    columns are unaffected: `json.dumps` writes a NUL as the escape \\u0000."""
    for name, value in params.items():
        if isinstance(value, str) and "\x00" in value:
            raise InvalidText(
                name, "contains a NUL character (\\x00), which no id, key, name or reason may hold"
            )
    return params


def run_callbacks(callbacks: list[Callable[[], None]]) -> None:
    """After a commit: each callback runs once; one failing must not stop the others."""
    for callback in callbacks:
        try:
            callback()
        except Exception:
            log.exception("an after-commit callback failed")
    callbacks.clear()


def parse_named_queries(text: str) -> dict[str, str]:
    """Split a `-- name: x` annotated SQL file into {name: statement}."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:  # the later one would silently replace the earlier for its callers
            raise ValueError(f"query name {name!r} is used twice; give each query its own name")
        lines = [line for line in body.strip().splitlines() if not line.lstrip().startswith("--")]
        queries[name] = "\n".join(lines).strip()
    return queries


def in_dialect(queries: Mapping[str, str], dialect: str) -> dict[str, str]:
    """`queries` with each `{json_list(:name)}` written out for `dialect` (the one thing the
    dialects spell differently that is not a real difference of behaviour)."""
    rows = JSON_LIST_ROWS[dialect]
    return {
        name: _JSON_LIST.sub(lambda m: rows.format(name=m[1]), sql) for name, sql in queries.items()
    }


# The query files of the stores, each shared by both dialects, with its dialect's overrides
# beside it (`<file>_<dialect>.sql`: a query there replaces the shared one of that name, or is
# the dialect's own). The leader's lock (leader.sql) is PostgreSQL's alone, loaded apart.
QUERY_FILES = ("queries", "bus")


def load_queries(dialect: str) -> dict[str, str]:
    """The named queries of every query file, each with the dialect's overrides on top."""
    package = resources.files("jobrouter.store")
    files = []
    for stem in QUERY_FILES:
        override = package.joinpath(f"{stem}_{dialect}.sql")
        files.append(
            QueryFile(
                stem,
                parse_named_queries(package.joinpath(f"{stem}.sql").read_text("utf-8")),
                parse_named_queries(override.read_text("utf-8")) if override.is_file() else {},
            )
        )
    return in_dialect(combine_query_files(files), dialect)


@dataclass(frozen=True)
class QueryFile:
    stem: str  # `queries` for queries.sql and its queries_<dialect>.sql
    shared: Mapping[str, str]
    in_dialect: Mapping[str, str]  # the dialect's overrides and its own queries


def combine_query_files(files: list[QueryFile]) -> dict[str, str]:
    """One {name: sql} of several query files. A name belongs to one file: used by two, or
    overridden by another file's dialect part, it is refused (the later one would silently
    replace the earlier for its callers)."""
    queries: dict[str, str] = {}
    owner: dict[str, str] = {}
    for file in files:
        for name in {**file.shared, **file.in_dialect}:
            if owner.setdefault(name, file.stem) != file.stem:
                raise ValueError(
                    f"query name {name!r} is used in {owner[name]}.sql and {file.stem}.sql "
                    "(or its dialect's file); give each query its own name"
                )
        queries.update(file.shared)
        queries.update(file.in_dialect)
    return queries


def load_migrations(dialect: str) -> list[tuple[int, str, str]]:
    """Numbered migrations `NNNN_name.sql` of a dialect, in order: (number, name, sql)."""
    folder = resources.files("jobrouter.store").joinpath("migrations", dialect)
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_(\w+)\.sql", entry.name)
        if match:
            found.append((int(match[1]), match[2], entry.read_text("utf-8")))
    return sorted(found)
