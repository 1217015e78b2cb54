"""The router uses a provider only through the `Provider` protocol: it warms each one before
its workers claim jobs, records its `model` on an attempt when the attempt starts, and closes
each one with the router (no `getattr` probes: a provider lacking a member fails loudly)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from jobrouter.api import Router
from jobrouter.states import AttemptState, JobState
from tests.support.fakes import FakeProvider, Step
from tests.unit.test_engine import SETTLE, config, shared, submit, url


async def test_the_router_warms_records_the_model_of_and_closes_every_provider(
    tmp_path: Path,
) -> None:
    called, gate = asyncio.Event(), asyncio.Event()

    async def on_call(_: object) -> None:
        called.set()

    a = FakeProvider(
        "a",
        model="fake/a-model",
        on_call=on_call,
        default=Step(output={"text": "ok"}, release=gate),
    )
    b = FakeProvider("b")
    router = await Router.open(url(tmp_path), config(caption=shared()), providers={"a": a, "b": b})
    try:
        assert (a.warmed, b.warmed) == (1, 1)
        job = await submit(router, "caption")
        await asyncio.wait_for(called.wait(), SETTLE)
        [started] = await router.attempts(job.id)  # the provider is answering: not finished
        assert (started.state, started.model) == (AttemptState.STARTED, "fake/a-model")
        gate.set()
        assert (await router.wait(job.id, timeout=SETTLE)).state is JobState.SUCCEEDED
        assert (a.closed, b.closed) == (0, 0)
    finally:
        await router.close()
    assert (a.closed, b.closed) == (1, 1)
