"""SQLite connector: one WAL file, one writer connection, one reader connection (and one for
long reads, on a thread). The file itself (its URL, connection settings, what its errors mean,
the damage check at open, migrations) is router/store/sqlite_file.py.

Write transactions use `BEGIN IMMEDIATE` so the write lock is taken up front: a read-then-write
transaction can never deadlock on a lock upgrade.

Why not aiosqlite (measured, docs/benchmarks.md): aiosqlite sends every statement through its
own thread, about 180 us per statement on these machines, and a job costs about 15 statements;
it cannot run a transaction in one hop. Only two steps of a write transaction can block: taking
the write lock (`BEGIN IMMEDIATE` may wait for another process) and `COMMIT` (fsync). BEGIN is
tried inline with no busy wait and goes to a worker thread only when another process holds the
lock. The statements between BEGIN and COMMIT run inline, in microseconds, because the write
lock is already held. Reads run inline on the reader connection: WAL readers do not wait for
writers. Except the long reads (`fetchall_aside`: the job listing and its counts, which may walk
many rows): those run on a worker thread, on a third connection of their own, so the event loop
(the job hot path, workers, heartbeats, lease renewals) keeps running meanwhile; one thread hop
per read, and the hot path's reads stay inline.

Group commit: the write transactions of one process share the writer connection, so they are
batched. The writer that opens a batch runs its statements directly (nobody has joined yet: on
failure the whole transaction is rolled back); the writers that join it each run inside their
own SAVEPOINT (a failure rolls back only their statements). A `write()` returns once the COMMIT
that carries it is durable. While one COMMIT's fsync runs on its thread, the writers that arrive
queue up and go together into the next transaction: under load many write transactions share
one fsync, and with one writer at a time nothing waits for a batch to fill. Bodies run one at a
time (`_body_lock`), so two of them never interleave statements. If a COMMIT fails, or SQLite
rolls a transaction back by itself (a full disk, an I/O error, an interrupt), every writer in
that batch gets the error: none of them was committed.


Where the COMMIT runs: on a worker thread while the router has more than one job in flight (so
others can join the next batch meanwhile); inline with at most one, where nobody could join and
the two handovers to a thread and back cost more than the fsync (see `_commit_when_idle`). The
inline COMMIT blocks the event loop for its fsync and, every 1000 pages of WAL, for SQLite's
automatic checkpoint: fine on a local disk (a fraction of a millisecond, a few milliseconds),
worth knowing on a slow one.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TypeVar

from jobrouter.errors import StoreError
from jobrouter.store.connector import (
    ConnectorStats,
    Params,
    Row,
    check_params,
    load_queries,
    run_callbacks,
    until_done,
)
from jobrouter.store.leader_lock import SoleLock
from jobrouter.store.sqlite_file import (
    BUSY_TIMEOUT_MS,
    connect,
    migrate,
    quick_check,
    sqlite_path,
    translated_errors,
)

T = TypeVar("T")


class _SqliteTx:
    """Statements on a connection the caller holds exclusively (run inline: see the docstring).
    `callbacks`: the batch's after-commit list (None on the reader, which commits nothing)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        stats: ConnectorStats,
        callbacks: list[Callable[[], None]] | None = None,
    ) -> None:
        self._conn = conn
        self._stats = stats
        self._callbacks = callbacks

    def after_commit(self, callback: Callable[[], None]) -> None:
        if self._callbacks is None:
            raise RuntimeError("after_commit outside a write transaction")
        self._callbacks.append(callback)

    async def execute(self, query: str, params: Params) -> int:
        self._stats.round_trips += 1
        cursor = self._conn.execute(query, check_params(params))
        count = cursor.rowcount
        cursor.close()
        return count

    async def fetchone(self, query: str, params: Params) -> Row | None:
        rows = await self.fetchall(query, params)
        return rows[0] if rows else None

    async def fetchall(self, query: str, params: Params) -> list[Row]:
        self._stats.round_trips += 1
        rows = self._conn.execute(query, check_params(params)).fetchall()
        return [dict(row) for row in rows]


class _Batch:
    """One SQLite transaction carrying the logical write transactions that joined it."""

    def __init__(self) -> None:
        self.committed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.broken: BaseException | None = None  # a member could not undo its statements
        self.after_commit: list[Callable[[], None]] = []  # members' callbacks, in order

    def settle(self, error: BaseException | None) -> None:
        """The batch's outcome, once: on success its callbacks run first, then its writers
        (waiting on `committed`) resume."""
        if self.committed.done():
            return
        if error is None:
            run_callbacks(self.after_commit)
            self.committed.set_result(None)
        else:
            self.after_commit.clear()
            self.committed.set_exception(error)
            self.committed.exception()  # its writers get it; nobody left over is not a leak


class SqliteConnector:
    dialect = "sqlite"

    def __init__(
        self,
        url: str,
        writer: sqlite3.Connection,
        reader: sqlite3.Connection,
        aside: sqlite3.Connection,
    ) -> None:
        self.url = url
        self._path = sqlite_path(url)
        self.queries: Mapping[str, str] = load_queries(self.dialect)
        self._writer = writer
        self._reader = reader
        self._body_lock = asyncio.Lock()  # one logical transaction's statements at a time
        self._queued = 0  # writers waiting for the body lock: they join the open batch
        self._batch: _Batch | None = None  # the open transaction new writers join
        self._commit_in_flight: asyncio.Future[None] | None = None  # the COMMIT on its thread
        # How many jobs this process has in flight (the router's engine tells; see
        # `_commit_when_idle`). Unknown: assume company, so group commit stays on.
        self.jobs_in_flight: Callable[[], int] = lambda: 2
        self.stats = ConnectorStats()
        self._read_tx = _SqliteTx(reader, self.stats)
        self._aside = aside  # the long reads' connection, used on a worker thread
        self._aside_lock = asyncio.Lock()  # one long read at a time on it

    @classmethod
    async def open(cls, url: str) -> SqliteConnector:
        path = sqlite_path(url)
        if str(path) != ":memory:" and not path.parent.exists():
            raise StoreError(f"folder {path.parent} does not exist; create it first", url=url)
        try:
            with translated_errors(url, path):
                writer = await asyncio.to_thread(connect, path)
                await asyncio.to_thread(quick_check, writer, path)
                await asyncio.to_thread(migrate, writer)
                reader = await asyncio.to_thread(connect, path)
                aside = await asyncio.to_thread(connect, path)
                writer.execute("PRAGMA busy_timeout=0")  # see _begin_now
        except StoreError:
            raise
        except Exception as exc:  # sqlite3.Error and OSError alike: name the file
            raise StoreError(f"cannot open SQLite database {path}: {exc}", url=url) from exc
        return cls(url, writer, reader, aside)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[_SqliteTx]:
        with translated_errors(self.url, self._path):
            async with self._write() as tx:
                yield tx

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[_SqliteTx]:
        self._queued += 1
        try:
            await self._body_lock.acquire()
        except BaseException:  # cancelled while queued: it may have been the batch's last
            self._queued -= 1
            self._commit_when_idle()
            raise
        self._queued -= 1
        try:
            batch = self._joinable_batch()
            opener = batch is None  # first in its batch: on failure, roll all of it back
            if batch is None:
                batch = await self._begin_batch()
            self.stats.write_transactions += 1
            if not opener:  # it joins a batch: its failure undoes its own statements only
                self.stats.round_trips += 2  # SAVEPOINT and RELEASE
                self._writer.execute("SAVEPOINT w")
            mark = len(batch.after_commit)
            try:
                yield _SqliteTx(self._writer, self.stats, batch.after_commit)
                self._check_still_open(batch)
            except BaseException:
                del batch.after_commit[mark:]
                self._undo(batch, opener)
                raise
            if not opener:
                self._writer.execute("RELEASE w")
        finally:
            self._body_lock.release()
            self._commit_when_idle()
        await _settled(batch.committed)

    def _joinable_batch(self) -> _Batch | None:
        """The open batch, unless SQLite rolled its transaction back under it (an I/O error,
        a full disk, an interrupt): then it fails now and the caller opens a fresh one."""
        batch = self._batch
        if batch is not None and not self._writer.in_transaction:
            self._batch = None
            batch.settle(
                batch.broken
                or StoreError(
                    "SQLite rolled back the transaction of this write's batch", url=self.url
                )
            )
            return None
        return batch

    def _check_still_open(self, batch: _Batch) -> None:
        if not self._writer.in_transaction:
            batch.broken = batch.broken or StoreError(
                "SQLite rolled back the transaction during this write", url=self.url
            )
            raise batch.broken

    def _undo(self, batch: _Batch, opener: bool) -> None:
        try:
            if opener or not self._writer.in_transaction:  # nobody joined (bodies run one at a
                self._writer.rollback()  # time), or SQLite rolled it all back: drop the batch
                self._batch = None
                batch.settle(batch.broken or StoreError("the write was rolled back", url=self.url))
            else:
                self._writer.execute("ROLLBACK TO w")
                self._writer.execute("RELEASE w")
        except sqlite3.Error as exc:  # the connection is unusable: the whole batch must go
            batch.broken = exc

    async def _begin_batch(self) -> _Batch:
        """Open the next SQLite transaction (once the previous one's COMMIT is over)."""
        if self._commit_in_flight is not None and not self._commit_in_flight.done():
            await asyncio.wait({self._commit_in_flight})  # the connection is busy until then
        self.stats.round_trips += 1  # BEGIN
        if not self._begin_now():
            await _in_thread(self._begin_waiting, undo=self._writer.rollback)
        self._batch = _Batch()
        return self._batch

    def _begin_now(self) -> bool:
        """BEGIN IMMEDIATE inline when the write lock is free; False when another process holds
        it (the writer's busy timeout is 0: waiting for the lock must not block the loop)."""
        if self._writer.in_transaction:  # left open by a failure we could not undo
            self._writer.rollback()
        try:
            self._writer.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            return False
        return True

    def _begin_waiting(self) -> None:
        """On a worker thread: wait up to the busy timeout for another process's write lock.
        (Inside a transaction begun IMMEDIATE the writer never waits for a lock again in WAL
        mode, which is why its busy timeout can be 0 the rest of the time.)"""
        self._writer.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        try:
            self._writer.execute("BEGIN IMMEDIATE")
        finally:
            self._writer.execute("PRAGMA busy_timeout=0")

    def _commit_when_idle(self) -> None:
        """Commit the open batch once no writer is queued to join it: its last writer starts
        the COMMIT at once (no waiting for company). With other jobs in flight, the COMMIT runs
        on a worker thread and the writers that arrive meanwhile form the next batch (group
        commit). With at most one, no writer can come to share it, so it runs inline: that
        saves the two handovers between the loop and a thread, each of which waits for the GIL
        (measured at concurrency 1: 0.4 ms less per job, which commits twice)."""
        batch = self._batch
        if batch is None or self._queued or self._body_lock.locked():
            return
        self._batch = None
        self.stats.round_trips += 1  # COMMIT
        self.stats.commits += 1
        try:
            if self.jobs_in_flight() <= 1:
                self._commit_or_rollback(batch.broken)
                batch.settle(None)
                return
            commit = asyncio.get_running_loop().run_in_executor(
                None, self._commit_or_rollback, batch.broken
            )
        except Exception as exc:
            batch.settle(exc)
            return
        commit.add_done_callback(lambda done: _deliver(done, batch))
        self._commit_in_flight = commit

    def _commit_or_rollback(self, broken: BaseException | None) -> None:
        try:
            if broken is not None:
                raise StoreError(
                    f"a write transaction could not be undone: {broken}", url=self.url
                ) from broken
            if not self._writer.in_transaction:
                raise StoreError("SQLite rolled the transaction back before COMMIT", url=self.url)
            self._writer.commit()
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._writer.rollback()
            raise

    async def fetchone(self, query: str, params: Params) -> Row | None:
        with translated_errors(self.url, self._path):
            return await self._read_tx.fetchone(query, params)

    async def fetchall(self, query: str, params: Params) -> list[Row]:
        with translated_errors(self.url, self._path):
            return await self._read_tx.fetchall(query, params)

    async def fetchall_aside(self, query: str, params: Params) -> list[Row]:
        """A long read on a worker thread, on its own connection (see the module docstring).
        A cancelled caller interrupts the statement and waits for its thread to let go of the
        connection before the cancellation goes on."""
        check_params(params)
        async with self._aside_lock:
            with translated_errors(self.url, self._path):
                conn = self._aside
                self.stats.round_trips += 1
                read = asyncio.ensure_future(asyncio.to_thread(_read_all, conn, query, params))
                try:
                    return await asyncio.shield(read)
                except asyncio.CancelledError:
                    conn.interrupt()  # the thread's statement ends with "interrupted"
                    await until_done(read)
                    if not read.cancelled():
                        read.exception()  # the interruption: the caller was cancelled anyway
                    raise

    def leader_lock(self, worker_id: str, *, heartbeat_s: float) -> SoleLock:
        """One machine, one file: this process leads (SQLite has no session lock that dies
        with its process)."""
        return SoleLock(worker_id)

    async def close(self) -> None:
        # Writers still queued commit their batch themselves; wait until the last COMMIT is over.
        while self._batch is not None or (
            self._commit_in_flight is not None and not self._commit_in_flight.done()
        ):
            if self._commit_in_flight is not None and not self._commit_in_flight.done():
                await asyncio.wait({self._commit_in_flight})
            else:
                await asyncio.sleep(0.001)
        async with self._aside_lock:  # a long read still running lets go of its connection
            self._aside.close()
        self._reader.close()
        self._writer.close()


async def _settled(future: asyncio.Future[T]) -> T:
    """Await `future` without cancelling it. A cancelled caller first waits for the future to
    end (a COMMIT it is part of), so its cancellation never races its own transaction."""
    if await until_done(future):
        raise asyncio.CancelledError
    return future.result()


def _deliver(commit: asyncio.Future[None], batch: _Batch) -> None:
    """Pass the COMMIT's outcome to its batch (callbacks, then every writer)."""
    if commit.cancelled():
        batch.settle(StoreError("the COMMIT was interrupted; its outcome is unknown"))
    else:
        batch.settle(commit.exception())


async def _in_thread(step: Callable[[], T], undo: Callable[[], object] | None = None) -> T:
    """Run a blocking step on a worker thread; if the caller is cancelled meanwhile (even more
    than once), let the step finish (and undo it) before passing the cancellation on, so the
    connection is never used by two threads at once nor left inside a half-open
    transaction."""
    task = asyncio.ensure_future(asyncio.to_thread(step))
    if await until_done(task):
        if undo is not None and not task.cancelled() and task.exception() is None:
            undo()
        raise asyncio.CancelledError
    return task.result()


def _read_all(conn: sqlite3.Connection, query: str, params: Params) -> list[Row]:
    return [dict(row) for row in conn.execute(query, params).fetchall()]
