"""The console's job list refreshes itself every 2 s per open tab; its counts by state (which
may walk many jobs) are kept between refreshes and counted anew on a page load (the Filter
button) or once older than their maximum age (router/ui/counts.py). In process, on SQLite and
PostgreSQL; the cache's clock is the test's, so nothing depends on how fast the machine is.
Before, every refresh counted anew: the second test fails there."""

from __future__ import annotations

import asyncio
import re

import httpx

from jobrouter import Router
from jobrouter.http.app import create_app
from jobrouter.listing import JobFilter
from jobrouter.ui.counts import CountsCache
from jobrouter.ui.session import COOKIE
from tests.support.backends import db_url as db_url  # a fixture, used by name
from tests.support.clock import ManualClock
from tests.support.echo_router import router as router  # a fixture, used by name
from tests.support.echo_router import submit_echo


async def _submit(client: httpx.AsyncClient, token: str, key: str) -> str:
    job = await submit_echo(client, {"Authorization": f"Bearer {token}"}, key)
    return str(job["id"])


def _queued(html: str) -> int:
    found = re.search(r'<li class="state-queued">queued <strong>(\d+)</strong>', html)
    assert found, html
    return int(found[1])


async def test_the_live_refresh_keeps_the_counts_and_a_page_load_counts_anew(
    router: Router,
) -> None:
    app = create_app(router)
    clock = ManualClock()
    cache = CountsCache(max_age_s=30.0, clock=clock)
    app.state.console_counts = cache
    token, _ = await router.store.tokens.create_token("shop-1")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://jobrouter", cookies={COOKIE: token}
    ) as client:
        await _submit(client, token, "k1")
        assert _queued((await client.get("/ui/jobs")).text) == 1
        second = await _submit(client, token, "k2")
        rows = (await client.get("/ui/jobs/rows")).text
        assert second in rows  # the list itself is read on every refresh
        assert _queued(rows) == 1  # the counts are the page load's
        assert "the counts every 30 s" in rows
        clock.now += 31.0
        assert _queued((await client.get("/ui/jobs/rows")).text) == 2  # too old: counted anew
        await _submit(client, token, "k3")
        assert _queued((await client.get("/ui/jobs")).text) == 3  # a page load counts anew


async def test_tabs_that_refresh_at_once_share_one_count(router: Router) -> None:
    cache = CountsCache(clock=ManualClock())
    stats = router.store.connector.stats
    before = stats.round_trips
    where = JobFilter(owner="shop-1")
    first, second = await asyncio.gather(
        cache.counts(router.store.jobs, where, fresh=False),
        cache.counts(router.store.jobs, where, fresh=False),
    )
    assert first is second
    assert stats.round_trips - before == 1
