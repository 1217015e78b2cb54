"""A job submitted to a router that runs its own workers starts its first attempt in the
transaction that creates it (one commit instead of two) when a worker slot is free and the
chosen provider's circuit is closed. Checked through the public `Router` on a real SQLite file:
the cost in write transactions, the event log, double submits (one job, one attempt, no slot
lost), a full engine (the job waits for a slot), an idempotency conflict, a half-open circuit.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jobrouter.config import BreakerConfig, EngineConfig, RouterConfig, TaskConfig
from jobrouter.errors import IdempotencyConflict
from jobrouter.providers import NotSent
from jobrouter.states import AttemptState, JobState
from jobrouter.store import open_store
from jobrouter.store.sqlite import SqliteConnector
from jobrouter.store.starts import AttemptStart
from tests.support.fakes import FakeProvider, Step
from tests.unit.test_engine import SETTLE, config, open_router, shared, submit, url


def one_worker(cfg: RouterConfig) -> RouterConfig:
    engine = EngineConfig(workers=1, poll_interval=0.05, sweep_interval=0.1, claim=5.0, lease=5.0)
    return cfg.model_copy(update={"engine": engine})


async def test_the_first_attempt_rides_in_the_creating_transaction(tmp_path: Path) -> None:
    a, b = FakeProvider("a"), FakeProvider("b")
    async with open_router(tmp_path, config(caption=shared()), {"a": a, "b": b}) as router:
        connector = router.store.connector
        assert isinstance(connector, SqliteConnector)
        before = connector.stats.write_transactions
        job = await submit(router, "caption")
        assert job.created and job.state is JobState.RUNNING  # created with its attempt
        done = await router.wait(job.id, timeout=SETTLE)
        assert done.state is JobState.SUCCEEDED
        assert connector.stats.write_transactions - before == 2  # create + start, CAS finish
        events = await router.events(job.id)
        assert [e.kind for e in events] == [
            "job.queued",
            "attempt.started",
            "attempt.succeeded",
            "job.succeeded",
        ]
        assert [e.seq for e in events] == [1, 2, 3, 4]
        [attempt] = await router.attempts(job.id)
        assert attempt.provider == "a" and attempt.state is AttemptState.SUCCEEDED
        assert len(a.calls) == 1 and b.calls == []


async def test_double_submits_make_one_job_one_attempt_and_lose_no_slot(tmp_path: Path) -> None:
    """Twenty concurrent submits of one key each take the only slot or find it taken; the
    nineteen that find the job must give back whatever they took, or the next job never runs."""
    a = FakeProvider("a", default=Step(delay=0.05, output={"text": "ok"}))
    cfg = one_worker(config(caption=shared()))
    async with open_router(tmp_path, cfg, {"a": a}) as router:
        jobs = await asyncio.gather(*(submit(router, "caption") for _ in range(20)))
        assert len({job.id for job in jobs}) == 1
        assert sum(job.created for job in jobs) == 1
        assert (await router.wait(jobs[0].id, timeout=SETTLE)).state is JobState.SUCCEEDED
        assert len(await router.attempts(jobs[0].id)) == 1
        after = await submit(router, "caption", key="k2")
        assert (await router.wait(after.id, timeout=SETTLE)).state is JobState.SUCCEEDED
        assert len(a.calls) == 2


async def test_with_every_worker_busy_a_new_job_waits_for_the_slot(tmp_path: Path) -> None:
    release = asyncio.Event()
    a = FakeProvider("a", steps=[Step(release=release, output={"text": "first"})])
    cfg = one_worker(config(caption=shared()))
    async with open_router(tmp_path, cfg, {"a": a}) as router:
        first = await submit(router, "caption", key="k1")
        second = await submit(router, "caption", key="k2")
        assert first.state is JobState.RUNNING  # took the slot with its attempt
        assert second.state is JobState.QUEUED  # no slot: created alone, waits for one
        await asyncio.sleep(0.2)
        assert len(a.calls) == 1 and await router.attempts(second.id) == []
        release.set()
        for job in (first, second):
            assert (await router.wait(job.id, timeout=SETTLE)).state is JobState.SUCCEEDED
        [first_attempt] = await router.attempts(first.id)
        [second_attempt] = await router.attempts(second.id)
        assert first_attempt.finished_at is not None
        assert second_attempt.started_at >= first_attempt.finished_at


async def test_an_idempotency_conflict_gives_the_slot_back(tmp_path: Path) -> None:
    a = FakeProvider("a")
    cfg = one_worker(config(caption=shared()))
    async with open_router(tmp_path, cfg, {"a": a}) as router:
        job = await submit(router, "caption")
        assert (await router.wait(job.id, timeout=SETTLE)).state is JobState.SUCCEEDED
        with pytest.raises(IdempotencyConflict):
            await router.submit("shop-1", "k1", "caption", {"product": "coffee"})
        later = await submit(router, "caption", key="k2")
        assert (await router.wait(later.id, timeout=SETTLE)).state is JobState.SUCCEEDED


async def test_a_half_open_circuit_keeps_its_probe_out_of_the_creating_transaction(
    tmp_path: Path,
) -> None:
    """A circuit opened by a real failure goes half-open after its cooldown; the probe is
    claimed fleet-wide in a transaction of its own, so the next job is created queued and its
    driver claims the probe, then starts the attempt."""
    a = FakeProvider("a", steps=[Step(error=NotSent("refused", provider="a"))])
    cfg = config(
        caption=TaskConfig(
            providers=["a"], side_effects="none", attempt_timeout=1.0, certification="none"
        )
    )
    cfg = cfg.model_copy(update={"breaker": BreakerConfig(failure_threshold=1, cooldown=0.2)})
    async with open_router(tmp_path, cfg, {"a": a}) as router:
        failed = await submit(router, "caption", key="k1")
        assert (await router.wait(failed.id, timeout=SETTLE)).state is JobState.FAILED
        await asyncio.sleep(0.3)  # past the cooldown: the next call is the probe
        job = await submit(router, "caption", key="k2")
        assert job.state is JobState.QUEUED
        assert (await router.wait(job.id, timeout=SETTLE)).state is JobState.SUCCEEDED
        assert len(a.calls) == 2


async def test_a_job_committed_but_never_handed_over_is_taken_up_again(tmp_path: Path) -> None:
    """What a hand-over that never ran leaves (the process died between COMMIT and its
    callbacks, say): a job claimed by this worker with a first attempt recorded but never sent.
    It is written here through a second store on the same file, which hands its jobs to no
    engine. The heartbeat renews only jobs in hand, so the claim and the lease expire, the
    sweeper records the attempt unknown (I7) and the job fails over."""
    a, b = FakeProvider("a"), FakeProvider("b")
    cfg = config(caption=shared()).model_copy(
        update={
            "engine": EngineConfig(poll_interval=0.05, sweep_interval=0.1, claim=0.5, lease=0.3)
        }
    )
    async with open_router(tmp_path, cfg, {"a": a, "b": b}) as router:
        assert router.engine is not None
        first = AttemptStart(provider="a", model=None, worker=router.engine.worker_id, lease_s=0.3)
        other = await open_store(url(tmp_path))
        job, attempt = await other.jobs.create_and_start(
            owner="shop-1",
            idempotency_key="lost",
            task="caption",
            input={"product": "tea"},
            params={},
            deadline_s=None,
            claimed_by=router.engine.worker_id,
            claim_s=0.5,
            first=first,
        )
        await other.close()
        assert attempt is not None
        done = await router.wait(job.id, timeout=SETTLE)
        assert done.state is JobState.SUCCEEDED
        attempts = {x.provider: x for x in await router.attempts(job.id)}
        assert attempts["a"].state is AttemptState.UNKNOWN  # never sent, but we cannot know
        assert attempts["b"].state is AttemptState.SUCCEEDED
        assert a.calls == [] and len(b.calls) == 1


@dataclass
class HeldCommit:
    """The COMMIT of the transaction that holds the job with idempotency key `key` stops on its
    thread (a slow disk) until `release` is set; `entered` says it got there. The test acts
    while that COMMIT is under way: an event, not a guess at how long the way there takes."""

    key: str
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    async def wait_entered(self) -> None:
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, self.entered.wait, SETTLE), "no COMMIT held"


@pytest.fixture
def held_commit(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldCommit]:
    held = HeldCommit(key="p1")
    real_commit = SqliteConnector._commit_or_rollback

    def slow_commit(self: SqliteConnector, broken: BaseException | None) -> None:
        mine = self._writer.execute(  # the transaction's own, uncommitted rows are visible here
            "SELECT 1 FROM jobs WHERE idempotency_key = ?", (held.key,)
        ).fetchone()
        if mine is not None and not held.entered.is_set():
            held.entered.set()
            held.release.wait(SETTLE)
        real_commit(self, broken)

    monkeypatch.setattr(SqliteConnector, "_commit_or_rollback", slow_commit)
    yield held
    held.release.set()


def post_and_load() -> RouterConfig:
    """`post` (exclusive, provider a) and `load` (provider h, which never answers): two load
    jobs keep more than one job in flight, so COMMITs go to a thread (group commit)."""
    return config(
        post=TaskConfig(
            providers=["a"], side_effects="external", attempt_timeout=5.0, certification="none"
        ),
        load=TaskConfig(
            providers=["h"], side_effects="none", attempt_timeout=60.0, certification="none"
        ),
    )


async def test_a_submit_cancelled_during_its_commit_still_runs_the_job(
    tmp_path: Path,
    held_commit: HeldCommit,
) -> None:
    """The caller gives up while the COMMIT is on its thread (held there, a slow disk):
    the job and its first attempt are durable, so the job must reach a worker all the same,
    and its provider be called once, not left to expire to `unknown` though never sent."""
    a, hang = FakeProvider("a"), FakeProvider("h", default=Step(hang=True))
    cfg = post_and_load()
    async with open_router(tmp_path, cfg, {"a": a, "h": hang}) as router:
        for key in ("l1", "l2"):  # two jobs in flight: COMMITs go to a thread (group commit)
            await submit(router, "load", key=key)
        submitting = asyncio.create_task(submit(router, "post", key="p1"))
        await held_commit.wait_entered()  # its COMMIT is on the thread now
        submitting.cancel()
        held_commit.release.set()
        with pytest.raises(asyncio.CancelledError):
            await submitting
        job = await router.find("shop-1", "p1")
        assert job is not None
        done = await router.wait(job.id, timeout=SETTLE)
        assert done.state is JobState.SUCCEEDED, done.error
        assert len(a.calls) == 1


async def test_close_waits_for_a_submit_still_committing_and_stops_its_job(
    tmp_path: Path,
    held_commit: HeldCommit,
) -> None:
    """close() while a submit's COMMIT is on its thread: close waits for it, the job created
    meanwhile is stopped like any job in hand, and no driver outlives close()."""
    a = FakeProvider("a", default=Step(delay=0.5, output={"text": "ok"}))
    hang = FakeProvider("h", default=Step(hang=True))
    cfg = post_and_load()
    router = await open_router(tmp_path, cfg, {"a": a, "h": hang})
    for key in ("l1", "l2"):
        await submit(router, "load", key=key)
    submitting = asyncio.create_task(submit(router, "post", key="p1"))
    await held_commit.wait_entered()  # its COMMIT is on the thread now
    closing = asyncio.create_task(router.close())
    await asyncio.sleep(0)  # close() is under way (the COMMIT still held) ...
    held_commit.release.set()  # ... when the disk gets to it
    await closing
    job = await submitting
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("job-")]
    async with open_router(tmp_path, cfg, {"a": a, "h": hang}, run_workers=False) as reader:
        [attempt] = await reader.attempts(job.id)
        # Stopped in flight: recorded unknown, or (stopped before its task ran) still started
        # until its lease runs out to unknown (I7). Never failed, never a result.
        assert attempt.state in (AttemptState.UNKNOWN, AttemptState.STARTED)
