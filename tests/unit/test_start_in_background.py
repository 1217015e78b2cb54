"""`Router.open(start_in_background=True)` (what `jobrouter serve` uses): the router is handed
back before its providers warm up (litellm's import takes seconds), jobs submitted meanwhile
are accepted queued with no attempt, and the first attempt starts only after the warm-up."""

from __future__ import annotations

import asyncio
from pathlib import Path

from jobrouter.api import Router
from jobrouter.states import JobState
from tests.support.fakes import FakeProvider
from tests.unit.test_engine import SETTLE, config, shared, submit, url


class SlowToLoad(FakeProvider):
    """A provider whose warm-up ends when the test says so."""

    loaded: asyncio.Event

    async def warm_up(self) -> None:
        await self.loaded.wait()


async def test_no_attempt_starts_before_the_warm_up_ends(tmp_path: Path) -> None:
    """Before, `open` awaited the warm-up itself: `serve` listened only after litellm loaded."""
    a = SlowToLoad("a")
    a.loaded = asyncio.Event()
    b = FakeProvider("b")
    opening = Router.open(
        url(tmp_path),
        config(caption=shared()),
        providers={"a": a, "b": b},
        start_in_background=True,
    )
    router = await asyncio.wait_for(opening.__aenter__(), SETTLE)  # returned, not warmed up
    try:
        job = await submit(router, "caption")
        assert job.state is JobState.QUEUED
        assert await router.attempts(job.id) == [] and a.calls == []
        a.loaded.set()
        await router.started()
        done = await router.wait(job.id, timeout=SETTLE)
        assert done.state is JobState.SUCCEEDED
        assert [attempt.provider for attempt in await router.attempts(job.id)] == ["a"]
    finally:
        await router.close()


async def test_close_during_the_warm_up_stops_cleanly(tmp_path: Path) -> None:
    a = SlowToLoad("a")
    a.loaded = asyncio.Event()  # never set
    router = await Router.open(
        url(tmp_path), config(caption=shared()), providers={"a": a}, start_in_background=True
    )
    job = await submit(router, "caption")
    await router.close()
    reopened = await Router.open(
        url(tmp_path),
        config(caption=shared()),
        run_workers=False,
        providers={"a": FakeProvider("a")},
    )
    try:
        assert (await reopened.get(job.id)).state is JobState.QUEUED  # kept, never started
    finally:
        await reopened.close()
