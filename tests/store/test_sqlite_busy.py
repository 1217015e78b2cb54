"""A real `SQLITE_BUSY`: another connection holds the file's write lock (`BEGIN IMMEDIATE`)
past the busy timeout while a provider's answer is being recorded. The write is tried again
(router/persist.py, router/store/transient.py) and the answer is kept: it is never thrown away
because the lock was taken for a moment. SQLite only: the lock and its error are SQLite's."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from jobrouter import Router
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from jobrouter.providers import CompletionRequest
from jobrouter.states import AttemptState, JobState
from jobrouter.store import transient
from tests.support.fakes import FakeProvider

SETTLE_S = 60.0  # a guard only
BUSY_MS = 50  # the writer gives up on the lock after this (10 s in production)


def holder(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=0")
    return conn


def busy_error(path: Path) -> sqlite3.OperationalError:
    """The error SQLite itself raises to a writer while another connection holds the lock."""
    first, second = holder(path), holder(path)
    try:
        first.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as caught:
            second.execute("BEGIN IMMEDIATE")
        first.rollback()
        return caught.value
    finally:
        first.close()
        second.close()


def test_a_real_busy_error_is_transient(tmp_path: Path) -> None:
    """mutant: `SQLITE_BUSY` removed from `_SQLITE_TRANSIENT_CODES`, seen failing. (Through the
    connector a BUSY arrives as a `StoreError`, which the next test covers.)"""
    error = busy_error(tmp_path / "lock.db")
    assert error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
    assert transient.is_transient(error)


class ReleaseOnFirstComplaint(logging.Handler):
    """Lets go of the held lock at the router's first warning or error: a write has then met
    the lock past the busy timeout. Which record that is decides the test: the store saying it
    will try the write again, not a driver that failed."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(logging.WARNING)
        self.conn = conn
        self.loop = asyncio.get_running_loop()
        self.first: asyncio.Future[logging.LogRecord] = self.loop.create_future()

    def emit(self, record: logging.LogRecord) -> None:
        if self.conn.in_transaction:
            self.conn.rollback()
        self.loop.call_soon_threadsafe(self._note, record)

    def _note(self, record: logging.LogRecord) -> None:
        if not self.first.done():
            self.first.set_result(record)


async def test_an_answer_recorded_while_another_process_holds_the_lock_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mutant: `is_transient` answering False for a `StoreError` (a busy file is one: no retry,
    the answer thrown away, the attempt left `started`), seen failing."""
    monkeypatch.setattr("jobrouter.store.sqlite.BUSY_TIMEOUT_MS", BUSY_MS)
    path = tmp_path / "jobs.db"
    lock = holder(path)
    released = ReleaseOnFirstComplaint(lock)
    router_log = logging.getLogger("jobrouter")
    router_log.addHandler(released)

    async def take_the_lock(request: CompletionRequest) -> None:
        lock.execute("BEGIN IMMEDIATE")  # the answer comes back while it is held

    provider = FakeProvider("a", on_call=take_the_lock)
    config = RouterConfig(
        tasks={"t": TaskConfig(providers=["a"], attempt_timeout=30.0, certification="none")},
        # No poll nor sweep while the lock is held: the job reaches its driver when it is created.
        engine=EngineConfig(poll_interval=30.0, sweep_interval=30.0, claim=30.0, lease=30.0),
    )
    providers: dict[str, Any] = {"a": provider}
    try:
        async with Router.open(f"sqlite:///{path}", config, providers=providers) as router:
            job = await router.submit("shop-1", "k1", "t", {"n": 1})
            async with asyncio.timeout(SETTLE_S):
                first = (await released.first).getMessage()
            assert first.startswith("store write failed"), first
            assert "busy" in first or "locked" in first
            done = await router.wait(job.id, timeout=SETTLE_S)
            attempts = await router.attempts(job.id)
    finally:
        router_log.removeHandler(released)
        lock.close()
    assert done.state is JobState.SUCCEEDED, done.error
    assert done.result == {"text": "ok"}
    assert [a.state for a in attempts] == [AttemptState.SUCCEEDED]
