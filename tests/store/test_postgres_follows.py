"""Migration 0014: the triggers notify a kind only while a live row of `jobrouter_follows` says
some listening connection follows it; a process that follows events writes its row after its
LISTEN, renews it, and deletes it on close. (The check it replaces read pg_stat_activity on
every notifying row: most of the server's CPU per job, docs/benchmarks.md.) Decided on
notifications arriving in commit order: a marker NOTIFY sent after a write arrives after
anything that write sent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from jobrouter.store import open_store
from jobrouter.store.pg_listen import FOLLOW_TTL_S
from tests.store.pg import fresh_database
from tests.store.test_claim_runnable import submit
from tests.support.waiting import until

pytestmark = pytest.mark.postgres

GUARD_S = 60.0  # against a hang only


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


async def heard_before_marker(spy: asyncpg.Connection, heard: asyncio.Queue[str]) -> list[str]:
    """The channels heard up to a marker NOTIFY sent now (after the writes to look at)."""
    await spy.execute("NOTIFY marker")
    channels = []
    async with asyncio.timeout(GUARD_S):
        while (channel := await heard.get()) != "marker":
            channels.append(channel)
    return channels


async def test_events_are_notified_only_while_a_live_follow_row_says_so(pg_url: str) -> None:
    store = await open_store(pg_url)
    spy = await asyncpg.connect(pg_url)  # LISTENs, but writes no follow row: hears only
    try:
        heard: asyncio.Queue[str] = asyncio.Queue()
        for channel in ("jobrouter_events", "marker"):
            await spy.add_listener(channel, lambda _c, _p, ch, _m: heard.put_nowait(ch))

        await submit(store, "nobody-follows")
        assert await heard_before_marker(spy, heard) == []

        await store.jobs.follow_events()
        rows = await spy.fetch("SELECT pid, kinds FROM jobrouter_follows")
        assert [r["kinds"] for r in rows] == ["events"]
        listening = await spy.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 "
            "AND application_name = 'jobrouter-listen:events'",
            rows[0]["pid"],
        )
        assert listening == 1  # the row names the connection that LISTENs
        await submit(store, "followed")
        assert await heard_before_marker(spy, heard) == ["jobrouter_events"]

        # A row past its time (its listener died without deleting it) counts for nothing.
        await spy.execute("UPDATE jobrouter_follows SET alive_until = 0")
        await submit(store, "lapsed")
        assert await heard_before_marker(spy, heard) == []
        await spy.execute(
            "UPDATE jobrouter_follows SET alive_until = extract(epoch FROM now()) + $1",
            FOLLOW_TTL_S,
        )
        await submit(store, "renewed")
        assert await heard_before_marker(spy, heard) == ["jobrouter_events"]
    finally:
        await store.close()
    try:
        assert await spy.fetchval("SELECT count(*) FROM jobrouter_follows") == 0
    finally:
        await spy.close()


async def test_a_process_that_does_not_watch_writes_no_follow_row(pg_url: str) -> None:
    async with asyncio.timeout(GUARD_S):
        store = await open_store(pg_url)
        try:
            await submit(store, "k1")
            assert await store.connector.fetchall("SELECT * FROM jobrouter_follows", {}) == []
        finally:
            await store.close()


async def test_the_follow_row_is_renewed_and_written_again_after_a_reconnect(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("jobrouter.store.pg_listen.FOLLOW_RENEW_S", 0.05)
    store = await open_store(pg_url)
    admin = await asyncpg.connect(pg_url)
    try:
        await store.jobs.follow_events()
        first = await admin.fetchrow("SELECT pid, alive_until FROM jobrouter_follows")
        assert first is not None

        async def renewed() -> bool:
            now = await admin.fetchval(
                "SELECT alive_until FROM jobrouter_follows WHERE pid = $1", first["pid"]
            )
            return bool(now > first["alive_until"])

        await until(renewed, "a renewal of the follow row")
        await admin.execute("SELECT pg_terminate_backend($1)", first["pid"])

        async def rewritten() -> bool:
            pids = {r["pid"] for r in await admin.fetch("SELECT pid FROM jobrouter_follows")}
            return bool(pids - {first["pid"]})

        # the reconnected listener writes a row of its own (the old one lapses)
        await until(rewritten, "a follow row of the reconnected listener")
    finally:
        await store.close()
        await admin.close()
