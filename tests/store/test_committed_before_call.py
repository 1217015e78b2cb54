"""A provider is called only once its attempt row is committed (the attempt is durable before
the call). The fake provider reads the database over another connection at the moment it is
called; the COMMIT of the job's creating transaction is held back until the provider is called
(or a guard runs out), so a hand-over that does not wait for the COMMIT is caught every time,
not by chance. On both backends."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest

from jobrouter import Router
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from jobrouter.providers import CompletionRequest
from jobrouter.states import AttemptState, JobState
from jobrouter.store import SqlStore, open_store
from jobrouter.store.sqlite import SqliteConnector
from tests.support.fakes import FakeProvider, Step

HOLD_S = 1.0  # how long a held COMMIT waits for a provider call that must not come
SETTLE_S = 60.0  # a guard only: the job settles in well under a second


class CommitGate:
    """Holds COMMITs while armed until `called` is set (the provider was called) or HOLD_S.
    A threading.Event: SQLite's group COMMIT runs on a worker thread."""

    def __init__(self) -> None:
        self.armed = False
        self.called = threading.Event()

    def hold(self) -> None:
        if self.armed:
            self.called.wait(HOLD_S)

    async def hold_async(self) -> None:
        if self.armed:
            await asyncio.get_running_loop().run_in_executor(None, self.called.wait, HOLD_S)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[CommitGate]:
    gate = CommitGate()
    real_sqlite = SqliteConnector._commit_or_rollback

    def sqlite_commit(self: SqliteConnector, broken: BaseException | None) -> None:
        gate.hold()
        real_sqlite(self, broken)

    real_pg = asyncpg.transaction.Transaction.commit

    async def pg_commit(self: asyncpg.transaction.Transaction) -> None:
        await gate.hold_async()
        await real_pg(self)

    monkeypatch.setattr(SqliteConnector, "_commit_or_rollback", sqlite_commit)
    monkeypatch.setattr(asyncpg.transaction.Transaction, "commit", pg_commit)
    yield gate
    gate.called.set()


@pytest.fixture
async def observer(db_url: str) -> AsyncIterator[SqlStore]:
    """A second store on the same database: its own connections see only committed rows."""
    other = await open_store(db_url)
    try:
        yield other
    finally:
        await other.close()


def two_in_flight_config() -> RouterConfig:
    """`post` runs on provider a; two `load` jobs on h (which never answers) keep more than one
    job in flight, so SQLite's COMMITs go to a worker thread (group commit) and the loop runs
    other tasks while one is under way, as on a busy router."""
    return RouterConfig(
        tasks={
            "post": TaskConfig(
                providers=["a"], side_effects="external", attempt_timeout=30.0, certification="none"
            ),
            "load": TaskConfig(
                providers=["h"], side_effects="none", attempt_timeout=60.0, certification="none"
            ),
        },
        engine=EngineConfig(poll_interval=0.05, sweep_interval=0.1, claim=30.0, lease=30.0),
    )


async def test_the_provider_is_called_only_after_its_attempt_row_is_committed(
    db_url: str, gate: CommitGate, observer: SqlStore
) -> None:
    """Kills two mutants: the creating transaction's `on_created` hand-over run inside the
    transaction instead of through `tx.after_commit` (router/store/jobs.py), and SQLite's
    `after_commit` running its callback at once instead of after the COMMIT
    (router/store/sqlite.py). Either lets the driver call the provider while the COMMIT is
    still held: the fake then reads no attempt row. Checked by applying each mutation."""
    seen: list[list[tuple[str, AttemptState]]] = []

    async def look(request: CompletionRequest) -> None:
        attempts = await observer.jobs.list_attempts(request.labels["job_id"])
        seen.append([(attempt.provider, attempt.state) for attempt in attempts])
        gate.called.set()

    a = FakeProvider("a", on_call=look)
    hang = FakeProvider("h", default=Step(hang=True))
    providers: dict[str, Any] = {"a": a, "h": hang}
    async with Router.open(db_url, two_in_flight_config(), providers=providers) as router:
        for key in ("l1", "l2"):
            await router.submit("shop-1", key, "load", {"n": key})
        gate.armed = True
        job = await router.submit("shop-1", "p1", "post", {"text": "hello"})
        gate.armed = False
        assert job.state is JobState.RUNNING, "the first attempt rode in the creating commit"
        done = await router.wait(job.id, timeout=SETTLE_S)
        assert done.state is JobState.SUCCEEDED, done.error
    assert seen == [[("a", AttemptState.STARTED)]]
