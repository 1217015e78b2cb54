"""`create_and_start` on every backend: a job and its first attempt in one transaction, and
never an attempt for a job that was found rather than created (I1), even under concurrent
double submits."""

from __future__ import annotations

import asyncio

import pytest

import jobrouter.store.jobs
from jobrouter.errors import IdempotencyConflict, StoreError
from jobrouter.models import Attempt, Job, NewEvent
from jobrouter.states import AttemptState, JobState
from jobrouter.store import SqlStore
from jobrouter.store.starts import AttemptStart
from tests.support.faulty_connector import FaultyConnector

SKIPPED = NewEvent(kind="provider.skipped", data={"provider": "c"})


def first_start() -> AttemptStart:
    """A new first attempt (each start is one attempt: its own id)."""
    return AttemptStart(provider="a", model="m", worker="w1", lease_s=30.0, notes=(SKIPPED,))


async def create(
    store: SqlStore, key: str = "k1", product: str = "tea"
) -> tuple[Job, Attempt | None]:
    return await store.jobs.create_and_start(
        owner="shop-1",
        idempotency_key=key,
        task="caption",
        input={"product": product},
        params={},
        deadline_s=60.0,
        claimed_by="w1",
        claim_s=60.0,
        first=first_start(),
    )


async def test_creates_the_job_running_with_its_attempt_in_one_transaction(
    store: SqlStore,
) -> None:
    before = store.connector.stats.write_transactions
    job, attempt = await create(store)
    assert store.connector.stats.write_transactions - before == 1
    assert job.created and job.state is JobState.RUNNING
    assert attempt is not None
    assert attempt.state is AttemptState.STARTED
    stored = await store.jobs.list_attempts(job.id)
    assert [(a.provider, a.worker, a.seq) for a in stored] == [("a", "w1", 1)]
    events = await store.jobs.list_events(job.id)
    assert [(e.seq, e.kind, e.job_state) for e in events] == [
        (1, "job.queued", JobState.QUEUED),
        (2, "provider.skipped", JobState.RUNNING),
        (3, "attempt.started", JobState.RUNNING),
    ]


async def test_a_found_job_gets_no_attempt_and_a_new_payload_is_refused(store: SqlStore) -> None:
    job, _ = await create(store)
    again, attempt = await create(store)
    assert attempt is None and not again.created
    assert again.id == job.id
    with pytest.raises(IdempotencyConflict):
        await create(store, product="coffee")
    assert len(await store.jobs.list_attempts(job.id)) == 1


async def test_concurrent_double_submits_start_exactly_one_attempt(store: SqlStore) -> None:
    results = await asyncio.gather(*(create(store) for _ in range(20)))
    jobs = {job.id for job, _ in results}
    started = [attempt for _, attempt in results if attempt is not None]
    assert len(jobs) == 1 and len(started) == 1
    assert len(await store.jobs.list_attempts(jobs.pop())) == 1


async def test_the_started_job_is_version_two_with_a_live_lease_and_a_gapless_log(
    store: SqlStore,
) -> None:
    """What the one-transaction start writes is what two transactions would have: version 2
    (created, then started), the attempt's lease running from now, the event counter at the
    last event, `attempt.started` naming its attempt. Kills the `_insert_started` mutants that
    change the version, the event counter, the lease's sign or the event's data."""
    job, attempt = await create(store)
    assert attempt is not None
    assert job.version == 2
    assert attempt.lease_until is not None and attempt.lease_until > attempt.started_at
    events = await store.jobs.list_events(job.id)
    assert [e.seq for e in events] == [1, 2, 3]
    started = events[-1]
    assert started.data == {"attempt_id": attempt.id, "provider": "a", "seq": 1}
    # The next event follows the last one: the job's counter was left at 3.
    await store.jobs.note(job.id, [NewEvent(kind="job.waiting", data={})])
    assert [e.seq for e in await store.jobs.list_events(job.id)] == [1, 2, 3, 4]
    assert (await store.jobs.expire_attempts()) == []  # the lease is alive


async def test_a_new_job_records_its_deadline_its_claim_and_its_queued_event(
    store: SqlStore,
) -> None:
    """The deadline and the claim are counted from the moment of creation, a job submitted
    without a claimant has none, and the `job.queued` event names the task. With and without
    a first attempt (the two insert paths). Kills mutants `jobs.create_and_start` 30 (the
    deadline dropped), 37, 38, 39 (the claim dropped, always set, or counted backwards) and
    44, 45, 46 (the queued event's data)."""
    for started in (False, True):
        claimed, _ = await store.jobs.create_and_start(
            owner="shop-1",
            idempotency_key=f"claimed-{started}",
            task="caption",
            input={"product": "tea"},
            params={},
            deadline_s=60.0,
            claimed_by="w1",
            claim_s=30.0,
            first=first_start() if started else None,
        )
        unclaimed, _ = await store.jobs.create_and_start(
            owner="shop-1",
            idempotency_key=f"unclaimed-{started}",
            task="caption",
            input={"product": "tea"},
            params={},
            deadline_s=None,
            claimed_by=None,
            claim_s=30.0,
            first=first_start() if started else None,
        )
        assert claimed.deadline_at is not None
        assert (claimed.deadline_at - claimed.created_at).total_seconds() == pytest.approx(60.0)
        assert unclaimed.deadline_at is None
        claims = {}
        for job in (claimed, unclaimed):
            row = await store.connector.fetchone(
                "SELECT created_at, claimed_by, claim_until FROM jobs WHERE id = :id",
                {"id": job.id},
            )
            assert row is not None
            claims[job.id] = (row["claimed_by"], row["claim_until"], row["created_at"])
        by, until, created = claims[claimed.id]
        assert by == "w1" and until is not None
        assert float(until) - float(created) == pytest.approx(30.0)
        assert claims[unclaimed.id][:2] == (None, None)
        for job in (claimed, unclaimed):
            queued = (await store.jobs.list_events(job.id))[0]
            assert (queued.kind, queued.data) == ("job.queued", {"task": "caption"})


class Recorder:
    """A port for the store's hand-over (router/store/handoff.py), as the engine is one."""

    def __init__(self) -> None:
        self.handed: list[tuple[Job, Attempt | None]] = []

    def committed(self, job: Job, attempt: Attempt | None) -> None:
        self.handed.append((job, attempt))


async def test_the_handoff_port_gets_the_committed_job_and_its_first_attempt_once(
    store: SqlStore,
) -> None:
    """The store's one hand-over port (the engine's) gets exactly the job and the attempt the
    call returns, once, after the commit; a job found under its key is handed to nobody.
    Mutants: `create_and_start` without its `tx.after_commit` hand-over (nothing handed), the
    hand-over given `created[0]` alone (TypeError in the commit's callbacks), and the attempt
    left out of it; each seen failing here."""
    port = Recorder()
    store.jobs.hand_over_to(port)

    async def submit() -> tuple[Job, Attempt | None]:
        return await store.jobs.create_and_start(
            owner="shop-1",
            idempotency_key="k1",
            task="caption",
            input={"product": "tea"},
            params={},
            deadline_s=None,
            claimed_by="w1",
            claim_s=60.0,
            first=first_start(),
        )

    job, attempt = await submit()
    assert attempt is not None
    assert port.handed == [(job, attempt)]
    found, none = await submit()
    assert (found.id, found.created, none) == (job.id, False, None)
    assert port.handed == [(job, attempt)]


async def test_a_store_hands_its_jobs_to_one_engine_only(store: SqlStore) -> None:
    """A second port is refused: two engines on one store would each drive the other's jobs."""
    store.jobs.hand_over_to(Recorder())
    with pytest.raises(RuntimeError, match="another engine"):
        store.jobs.hand_over_to(Recorder())


async def test_a_started_creation_keeps_the_created_jobs_for_wait(store: SqlStore) -> None:
    """After a creation with its first attempt, `created_here` still gives that job as
    committed (a `wait` right after `submit` needs no read), and a job created before it is
    kept too: the creation's change notice names its own job, with the job. Kills mutants
    `jobs.create_and_start` 119 (the notice names no job: every watcher reads again and the
    kept jobs are dropped), 120 and 122 (the notice without the job: it is dropped)."""
    earlier, _ = await create(store, key="k0")
    job, attempt = await create(store, key="k1")
    assert attempt is not None
    assert store.jobs.created_here(job.id) == job
    assert store.jobs.created_here(earlier.id) == earlier


@pytest.mark.parametrize("first", [None, first_start()], ids=["queued", "started"])
async def test_a_creation_whose_commit_fails_is_not_remembered_and_raises_its_error(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch, first: AttemptStart | None
) -> None:
    """The creating transaction runs all its statements, then fails instead of committing
    (tests/support/faulty_connector.py: "connection lost before COMMIT"): the caller gets that
    StoreError, the job was not written, and the process does not keep it as created here (a
    `wait` would be handed a job that never existed). Kills `JobMethods.create_and_start` 107,
    108 (`_forget_created(None)`, `str(None)`: the job kept) and 109, 110 (`row_params["XXidXX"]`,
    `["ID"]`: a KeyError in place of the store's error)."""
    made: list[str] = []
    real_new_id = jobrouter.store.jobs.new_id

    def noted_new_id() -> str:
        made.append(real_new_id())
        return made[-1]

    monkeypatch.setattr(jobrouter.store.jobs, "new_id", noted_new_id)
    faulty = FaultyConnector(store.connector)
    faulty.fail("insert_job", "before")
    creating = SqlStore(faulty)  # the same database, through the fault injector
    with pytest.raises(StoreError, match="before COMMIT"):
        await creating.jobs.create_and_start(
            owner="shop-1",
            idempotency_key="k1",
            task="caption",
            input={"product": "tea"},
            params={},
            deadline_s=60.0,
            claimed_by="w1",
            claim_s=60.0,
            first=first,
        )
    assert faulty.injected["insert_job"] == 1
    job_id = made[0]  # the job's id is the first one made
    assert creating.jobs.created_here(job_id) is None
    assert await store.jobs.get_job(job_id) is None
    assert await store.jobs.find_job("shop-1", "k1") is None
