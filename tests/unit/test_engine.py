"""The engine through the public `Router`, with scripted in-process providers and a real SQLite
file: timeouts are unknown (I3), exclusive tasks never start beside an open attempt (I4),
hedging and racing finishes have one winner (I2), watch/wait, restarts (I7)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from jobrouter import Router
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from jobrouter.errors import ConfigError, InvalidIdempotencyKey
from jobrouter.models import Attempt, Job, JobEvent
from jobrouter.providers.classify import from_status
from jobrouter.states import AttemptState, JobState
from tests.support.fakes import FakeProvider, Step
from tests.support.store_jobs import count_jobs, create_job
from tests.support.waiting import until

TIMEOUT = 0.3  # attempt_timeout; the driver's own guard adds GUARD_S on top
SETTLE = 60.0  # a guard against a hang only: jobs settle in well under a second
PROBE = "probe"  # the task of `a_later_job_ran`


def config(**tasks: TaskConfig) -> RouterConfig:
    return RouterConfig(
        tasks=tasks,
        engine=EngineConfig(poll_interval=0.05, sweep_interval=0.1, claim=5.0, lease=5.0),
    )


def exclusive(**extra: Any) -> TaskConfig:
    values: dict[str, Any] = {"attempt_timeout": TIMEOUT, **extra}
    return TaskConfig(providers=["a", "b"], side_effects="external", certification="none", **values)


def shared(**extra: Any) -> TaskConfig:
    values: dict[str, Any] = {"attempt_timeout": TIMEOUT, **extra}
    return TaskConfig(providers=["a", "b"], side_effects="none", certification="none", **values)


def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'r.db'}"


def open_router(
    tmp_path: Path,
    cfg: RouterConfig,
    providers: Mapping[str, FakeProvider],
    *,
    run_workers: bool = True,
) -> Any:
    every = {PROBE: FakeProvider(PROBE), **providers} if PROBE in cfg.tasks else dict(providers)
    return Router.open(url(tmp_path), cfg, providers=every, run_workers=run_workers)


def with_probe(cfg: RouterConfig) -> RouterConfig:
    probe = TaskConfig(providers=[PROBE], side_effects="none", attempt_timeout=TIMEOUT)
    return cfg.model_copy(update={"tasks": {**cfg.tasks, PROBE: probe}})


async def a_later_job_ran(router: Router) -> None:
    """The positive signal a "nothing else happens" check waits for: a job created queued now,
    outside any worker, is found by the poller and run to the end, so every runnable job has
    been looked at since (needs `with_probe`)."""
    job = await create_job(
        router.store,
        owner=PROBE,
        idempotency_key=uuid.uuid4().hex,
        task=PROBE,
        input={},
        params={},
        deadline_s=None,
        claimed_by=None,
        claim_s=5.0,
    )
    assert (await router.wait(job.id, timeout=SETTLE)).state is JobState.SUCCEEDED


async def collect(router: Router, job_id: str, after: int = 0) -> list[JobEvent]:
    async with asyncio.timeout(SETTLE):
        return [event async for event in router.watch(job_id, after=after, poll=0.05)]


def by_provider(attempts: list[Attempt]) -> dict[str, Attempt]:
    return {attempt.provider: attempt for attempt in attempts}


async def settled_attempt(router: Router, job_id: str, provider: str) -> Attempt:
    """The provider's attempt once its outcome is recorded (the fake's call ends first)."""
    found: list[Attempt] = []

    async def recorded() -> bool:
        found[:] = [x for x in await router.attempts(job_id) if x.provider == provider]
        return bool(found) and found[0].state is not AttemptState.STARTED

    await until(recorded, f"outcome of the attempt of {provider}", SETTLE, every=0.01)
    return found[0]


async def submit(router: Router, task: str, key: str = "k1") -> Job:
    return await router.submit("shop-1", key, task, {"product": "tea"})


# ---- I3 / I4: a timeout is unknown, and an exclusive job waits for a person ---------------------


async def test_timeout_is_unknown_and_exclusive_job_never_starts_a_second_attempt(
    tmp_path: Path,
) -> None:
    a = FakeProvider("a", default=Step(hang=True))
    b = FakeProvider("b")
    cfg = with_probe(config(post=exclusive()))
    async with open_router(tmp_path, cfg, {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        settled = await router.wait(job.id, timeout=SETTLE)
        assert settled.state is JobState.UNKNOWN  # needs attention, never failed
        assert "resolve" in (settled.error or "")
        [attempt] = await router.attempts(job.id)
        assert attempt.provider == "a"
        assert attempt.state is AttemptState.UNKNOWN
        assert attempt.error_kind == "unknown"
        await a_later_job_ran(router)  # the poller has looked since: nothing else may start
        assert b.calls == []
        assert len(await router.attempts(job.id)) == 1
        assert (await router.get(job.id)).state is JobState.UNKNOWN


async def test_resolving_the_unknown_attempt_as_failed_continues_with_provider_b(
    tmp_path: Path,
) -> None:
    a = FakeProvider("a", default=Step(hang=True))
    b = FakeProvider("b", default=Step(output={"text": "from b"}))
    async with open_router(tmp_path, config(post=exclusive()), {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        assert (await router.wait(job.id, timeout=SETTLE)).state is JobState.UNKNOWN
        [unknown] = await router.attempts(job.id)
        assert b.calls == []

        reopened = await router.resolve(unknown.id, "failed", note="checked: no post was made")
        assert reopened.state is JobState.RUNNING
        done = await router.wait(job.id, timeout=SETTLE)
        assert done.state is JobState.SUCCEEDED
        assert done.result == {"text": "from b"}
        attempts = await router.attempts(job.id)
        assert [(x.provider, x.state) for x in attempts] == [
            ("a", AttemptState.FAILED),
            ("b", AttemptState.SUCCEEDED),
        ]
        assert attempts[0].error_kind == "resolved"
        assert done.winner_attempt_id == attempts[1].id
        assert len(a.calls) == 1 and len(b.calls) == 1


async def test_resolving_the_unknown_attempt_as_succeeded_finishes_the_job(
    tmp_path: Path,
) -> None:
    a = FakeProvider("a", default=Step(hang=True))
    b = FakeProvider("b")
    cfg = with_probe(config(post=exclusive()))
    async with open_router(tmp_path, cfg, {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        assert (await router.wait(job.id, timeout=SETTLE)).state is JobState.UNKNOWN
        [unknown] = await router.attempts(job.id)
        done = await router.resolve(unknown.id, "succeeded", {"text": "posted"}, "seen online")
        assert done.state is JobState.SUCCEEDED
        assert done.result == {"text": "posted"}
        assert done.winner_attempt_id == unknown.id
        [attempt] = await router.attempts(job.id)
        assert attempt.state is AttemptState.SUCCEEDED
        await a_later_job_ran(router)
        assert b.calls == []

        # A watcher arriving now sees the whole story, past the pause for a person.
        events = await collect(router, job.id)
        kinds = [event.kind for event in events]
        assert "job.unknown" in kinds
        assert kinds[-1] == "job.succeeded"
        assert [event.seq for event in events] == list(range(1, len(events) + 1))


async def test_cancelling_an_unknown_exclusive_job_never_calls_b(tmp_path: Path) -> None:
    a = FakeProvider("a", default=Step(hang=True))
    b = FakeProvider("b")
    cfg = with_probe(config(post=exclusive()))
    async with open_router(tmp_path, cfg, {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        assert (await router.wait(job.id, timeout=SETTLE)).state is JobState.UNKNOWN
        cancelled = await router.cancel(job.id)
        assert cancelled.state is JobState.CANCELLED
        [attempt] = await router.attempts(job.id)
        # issue 14: its "may have happened" stays on the attempt (before: rewritten cancelled)
        assert attempt.state is AttemptState.UNKNOWN and attempt.error_kind == "unknown"
        assert attempt.error is not None and "may have" in attempt.error
        await a_later_job_ran(router)
        assert b.calls == []
        assert (await router.get(job.id)).state is JobState.CANCELLED
        assert len(a.calls) == 1


# ---- non-exclusive: failover, hedging, racing finishes ------------------------------------------


async def test_non_exclusive_hanging_primary_fails_over_and_the_fallback_wins(
    tmp_path: Path,
) -> None:
    a = FakeProvider("a", default=Step(hang=True))
    b = FakeProvider("b", default=Step(output={"text": "from b"}))
    async with open_router(tmp_path, config(caption=shared()), {"a": a, "b": b}) as router:
        job = await submit(router, "caption")
        done = await router.wait(job.id, timeout=SETTLE)
        assert done.state is JobState.SUCCEEDED
        assert done.result == {"text": "from b"}
        attempts = by_provider(await router.attempts(job.id))
        assert attempts["a"].state is AttemptState.UNKNOWN  # timed out: unknown, not failed
        assert attempts["a"].error_kind == "unknown"
        assert attempts["b"].state is AttemptState.SUCCEEDED
        assert done.winner_attempt_id == attempts["b"].id


async def test_hedge_fallback_wins_and_the_primary_is_cancelled_not_failed(
    tmp_path: Path,
) -> None:
    never = asyncio.Event()  # the primary answers only if the test waited for it: never
    a = FakeProvider("a", default=Step(release=never, output={"text": "from a"}))
    b = FakeProvider("b", default=Step(output={"text": "from b"}))
    cfg = config(caption=shared(hedge_after=0.2, attempt_timeout=60.0))
    async with open_router(tmp_path, cfg, {"a": a, "b": b}) as router:
        job = await submit(router, "caption")
        done = await router.wait(job.id, timeout=SETTLE)  # did not wait for the silent primary
        assert done.state is JobState.SUCCEEDED
        assert done.result == {"text": "from b"}
        attempts = by_provider(await router.attempts(job.id))
        assert attempts["b"].state is AttemptState.SUCCEEDED
        assert done.winner_attempt_id == attempts["b"].id
        primary = await settled_attempt(router, job.id, "a")
        assert primary.state is AttemptState.CANCELLED
        assert primary.output is None
        hedge_start = attempts["b"].started_at - attempts["a"].started_at
        assert hedge_start.total_seconds() >= 0.2
        kinds = [event.kind for event in await router.events(job.id)]
        assert "attempt.hedged" in kinds


async def test_both_answer_the_first_to_answer_wins_the_other_is_lost(tmp_path: Path) -> None:
    release_a, release_b = asyncio.Event(), asyncio.Event()
    a = FakeProvider("a", default=Step(release=release_a, output={"text": "from a"}))
    b = FakeProvider("b", default=Step(release=release_b, output={"text": "from b"}))
    cfg = config(caption=shared(hedge_after=0.1, attempt_timeout=5.0))
    async with open_router(tmp_path, cfg, {"a": a, "b": b}) as router:
        job = await submit(router, "caption")
        await until(lambda: a.in_flight == b.in_flight == 1, "both calls", SETTLE, every=0.01)
        release_b.set()  # b (started second) answers first...
        release_a.set()  # ...and a answers right after it
        done = await router.wait(job.id, timeout=SETTLE)
        assert done.state is JobState.SUCCEEDED
        assert done.result == {"text": "from b"}
        await settled_attempt(router, job.id, "a")
        attempts = by_provider(await router.attempts(job.id))
        assert done.winner_attempt_id == attempts["b"].id
        assert attempts["b"].state is AttemptState.SUCCEEDED
        assert attempts["a"].state is AttemptState.LOST
        assert attempts["a"].output is None


# ---- watch and wait ---------------------------------------------------------------------------


async def test_watch_yields_every_event_from_seq_1_and_ends_when_terminal(
    tmp_path: Path,
) -> None:
    a = FakeProvider("a", default=Step(delay=0.1, output={"text": "ok"}))
    async with open_router(tmp_path, config(caption=shared()), {"a": a}) as router:
        job = await submit(router, "caption")
        events = await collect(router, job.id)
        assert [event.seq for event in events] == list(range(1, len(events) + 1))
        assert events[0].kind == "job.queued"
        assert events[-1].kind == "job.succeeded"
        assert events[-1].job_state is JobState.SUCCEEDED
        assert "attempt.started" in [event.kind for event in events]

        # After completion: every stored event, then the end.
        assert await collect(router, job.id) == events
        assert await collect(router, job.id, after=2) == events[2:]


async def test_watch_does_not_end_when_an_attempt_ends_and_the_job_continues(
    tmp_path: Path,
) -> None:
    a = FakeProvider("a", default=Step(delay=0.05, error=from_status(500, "HTTP 500", "a")))
    b = FakeProvider("b", default=Step(delay=0.05, output={"text": "from b"}))
    async with open_router(tmp_path, config(caption=shared()), {"a": a, "b": b}) as router:
        job = await submit(router, "caption")
        events = await collect(router, job.id)
        started = [e.data["provider"] for e in events if e.kind == "attempt.started"]
        assert started == ["a", "b"]
        kinds = [event.kind for event in events]
        assert kinds.index("attempt.failed") < kinds.index("job.succeeded")
        assert kinds[-1] == "job.succeeded"
        assert [event.seq for event in events] == list(range(1, len(events) + 1))


async def test_watch_ends_when_the_job_needs_attention(tmp_path: Path) -> None:
    a = FakeProvider("a", default=Step(hang=True))
    async with open_router(tmp_path, config(post=exclusive()), {"a": a}) as router:
        job = await submit(router, "post")
        events = await collect(router, job.id)
        assert events[-1].kind == "job.unknown"
        assert "attempt.unknown" in [event.kind for event in events]


async def test_wait_raises_timeout_before_the_deadline(tmp_path: Path) -> None:
    a = FakeProvider("a", default=Step(hang=True))
    cfg = config(caption=shared(attempt_timeout=30.0, deadline=60.0))
    async with open_router(tmp_path, cfg, {"a": a}) as router:
        job = await submit(router, "caption")
        began = time.monotonic()
        with pytest.raises(TimeoutError, match=job.id):
            await router.wait(job.id, timeout=0.3)
        # It waited its own timeout, not the job's 60 s deadline (the bound is a guard: the
        # deadline is far, so a loaded machine cannot blur the two).
        assert 0.3 <= time.monotonic() - began < 30.0
        assert (await router.get(job.id)).state is JobState.RUNNING


# ---- submit validation ------------------------------------------------------------------------


async def test_submit_of_an_unknown_task_names_the_configured_tasks(tmp_path: Path) -> None:
    a = FakeProvider("a")
    cfg = config(caption=shared(), post=exclusive())
    async with open_router(tmp_path, cfg, {"a": a, "b": FakeProvider("b")}) as router:
        with pytest.raises(ConfigError) as info:
            await router.submit("shop-1", "k1", "summary", {"x": 1})
        assert "summary" in str(info.value)
        assert "caption" in str(info.value) and "post" in str(info.value)
        assert await count_jobs(router.store) == 0


async def test_submit_with_an_empty_key_is_refused(tmp_path: Path) -> None:
    async with open_router(
        tmp_path, config(caption=shared()), {"a": FakeProvider("a"), "b": FakeProvider("b")}
    ) as router:
        with pytest.raises(InvalidIdempotencyKey, match="idempotency_key"):
            await router.submit("shop-1", "", "caption", {"x": 1})
        assert await count_jobs(router.store) == 0


async def test_resubmit_returns_the_same_job_and_calls_the_provider_once(
    tmp_path: Path,
) -> None:
    a = FakeProvider("a", default=Step(delay=0.05, output={"text": "ok"}))
    async with open_router(tmp_path, with_probe(config(caption=shared())), {"a": a}) as router:
        jobs = await asyncio.gather(*(submit(router, "caption") for _ in range(10)))
        assert len({job.id for job in jobs}) == 1
        done = await router.wait(jobs[0].id, timeout=SETTLE)
        assert done.state is JobState.SUCCEEDED
        await a_later_job_ran(router)
        assert len(a.calls) == 1


# ---- restarts (I7) ----------------------------------------------------------------------------


async def test_a_job_accepted_without_workers_is_picked_up_after_restart(
    tmp_path: Path,
) -> None:
    a = FakeProvider("a", default=Step(output={"text": "ok"}))
    cfg = config(caption=shared())
    async with open_router(tmp_path, cfg, {"a": a}, run_workers=False) as router:
        job = await submit(router, "caption")
        await asyncio.sleep(0.1)
        assert (await router.get(job.id)).state is JobState.QUEUED
    assert a.calls == []

    async with open_router(tmp_path, cfg, {"a": a}) as router:
        done = await router.wait(job.id, timeout=SETTLE)
        assert done.state is JobState.SUCCEEDED
        assert done.result == {"text": "ok"}
        assert len(a.calls) == 1


async def test_close_with_an_attempt_in_flight_leaves_it_unknown(tmp_path: Path) -> None:
    a = FakeProvider("a", default=Step(hang=True))
    b = FakeProvider("b")
    cfg = config(post=exclusive(attempt_timeout=30.0))
    async with open_router(tmp_path, cfg, {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        await until(lambda: a.in_flight == 1, "the call to a", SETTLE, every=0.01)
    assert a.in_flight == 0

    async with open_router(tmp_path, cfg, {"a": a, "b": b}, run_workers=False) as router:
        [attempt] = await router.attempts(job.id)
        assert attempt.state is AttemptState.UNKNOWN  # the router does not know: never failed
        assert attempt.error_kind == "unknown"
        assert (await router.get(job.id)).state is JobState.RUNNING
    assert b.calls == []


async def test_restart_after_close_in_flight_does_not_start_a_second_exclusive_attempt(
    tmp_path: Path,
) -> None:
    a = FakeProvider("a", default=Step(hang=True))
    b = FakeProvider("b")
    cfg = with_probe(
        RouterConfig(
            tasks={"post": exclusive(attempt_timeout=30.0)},
            engine=EngineConfig(poll_interval=0.05, sweep_interval=0.1, claim=0.2, lease=5.0),
        )
    )
    async with open_router(tmp_path, cfg, {"a": a, "b": b}) as router:
        job = await submit(router, "post")
        await until(lambda: a.in_flight == 1, "the call to a", SETTLE, every=0.01)

    async with open_router(tmp_path, cfg, {"a": a, "b": b}) as router:
        settled = await router.wait(job.id, timeout=SETTLE)  # the claim expires: picked up
        assert settled.state is JobState.UNKNOWN
        await a_later_job_ran(router)
        assert b.calls == []
        assert len(a.calls) == 1
        assert len(await router.attempts(job.id)) == 1
