"""What the leader logs when it steps down, on each backend: INFO on a normal close (every
`serve`, `worker` and demo ends so; a WARNING there trains operators to ignore warnings), a
WARNING when its lock is lost."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from jobrouter.leader import Leader
from jobrouter.store import SqlStore
from jobrouter.store.connector import LeaderLock
from tests.store.test_leader import WAIT_S, deposed, elected


class LosableLock:
    """The backend's real lock, whose session the test can declare lost (`check` raises, as a
    dead session's does)."""

    def __init__(self, lock: LeaderLock) -> None:
        self.lock = lock
        self.lease_s = lock.lease_s
        self.lost = False
        self._on_lost: Callable[[], None] = lambda: None

    @property
    def retry_in(self) -> float | None:
        return self.lock.retry_in

    async def try_acquire(self) -> bool:
        return not self.lost and await self.lock.try_acquire()  # lost: another process has it

    async def check(self) -> None:
        if self.lost:
            raise ConnectionResetError("the lock's session ended")
        await self.lock.check()

    async def release(self) -> None:
        await self.lock.release()

    async def holder(self) -> str | None:
        return await self.lock.holder()

    def on_lost(self, callback: Callable[[], None]) -> None:
        self._on_lost = callback
        self.lock.on_lost(callback)

    def lose(self) -> None:
        self.lost = True
        self._on_lost()


def stepped_down(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "jobrouter.leader" and "stepped down" in r.msg]


async def elected_leader(store: SqlStore, lock: LosableLock) -> Leader:
    leader = Leader(lock, "w1", [], heartbeat_s=0.05)
    leader.start()
    await elected(leader)
    return leader


async def test_a_normal_close_steps_down_at_info(
    store: SqlStore, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """mutant: `stop` deposing at the default level (WARNING), seen failing on both backends."""
    caplog.set_level(logging.INFO, logger="jobrouter.leader")
    lock = LosableLock(store.connector.leader_lock("w1", heartbeat_s=0.05))
    leader = await elected_leader(store, lock)
    await leader.stop()
    [record] = stepped_down(caplog)
    assert record.levelno == logging.INFO
    assert record.getMessage() == "leader w1 stepped down: stopping"


async def test_a_lost_lock_steps_down_at_warning(
    store: SqlStore, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """mutant: `_depose`'s default level INFO, seen failing on both backends."""
    caplog.set_level(logging.INFO, logger="jobrouter.leader")
    lock = LosableLock(store.connector.leader_lock("w1", heartbeat_s=0.05))
    leader = await elected_leader(store, lock)
    try:
        lock.lose()
        await asyncio.wait_for(deposed(leader), WAIT_S)
        [record] = stepped_down(caplog)
        assert record.levelno == logging.WARNING
        assert record.getMessage() == "leader w1 stepped down: lease lost"
    finally:
        await leader.stop()
    assert len(stepped_down(caplog)) == 1  # stopping a deposed leader says nothing more
