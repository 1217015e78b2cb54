"""An attempt call's phase (router/call_phase.py): every (from, to) pair against a table written
out here, each phase's flags, and the two decisions that read them, per phase: what a driver
letting go of its job stops and records `not called` (`JobDriver._stop_in_flight`), and which
`started` attempts of this worker it adopts and calls (`JobDriver._adopt_orphans`: I3 on one
side, a false `unknown` on the other). The decisions run on a real driver over a real store;
each call's task is a stand-in, so the phase is the one the test sets."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobrouter import Router
from jobrouter.attempt_call import NOT_CALLED
from jobrouter.call_phase import (
    CALL_TRANSITIONS,
    CallPhase,
    CallRecord,
    call_can_move,
)
from jobrouter.driver import JobDriver
from jobrouter.errors import InvalidTransition
from jobrouter.models import Attempt
from jobrouter.states import AttemptState
from tests.support.fakes import FakeProvider
from tests.support.store_jobs import create_job
from tests.unit.test_engine import SETTLE, config, shared, url

W, C, B, A, R, N = "written", "calling", "unbuilt", "answered", "recorded", "not_called"

EXPECTED_MOVES = {
    (W, C),  # the provider call begins
    (W, B),  # the attempt's request cannot be built: nothing is sent
    (W, N),  # its driver stopped before its task ran
    (C, A),  # an answer, a provider error, a timeout
    (C, R),  # cancelled in flight: recorded unknown, or cancelled with the driver's reason
    (B, R),
    (B, N),  # its record failed; the stopping driver records it not called
    (A, R),
}

# phase: (terminal, recording, request_out)
EXPECTED_FLAGS = {
    W: (False, False, False),
    C: (False, False, True),
    B: (False, True, False),
    A: (False, True, True),
    R: (True, False, False),
    N: (True, False, False),
}


def test_the_phases_are_the_ones_written_here() -> None:
    assert {str(phase) for phase in CallPhase} == set(EXPECTED_FLAGS)
    assert set(CALL_TRANSITIONS) == set(CallPhase)


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(CallPhase, CallPhase)))
def test_every_pair_of_phases_moves_or_is_refused_as_written_here(
    src: CallPhase, dst: CallPhase
) -> None:
    """Mutants: CALL_TRANSITIONS[ANSWERED] with CALLING added (a recorded answer called
    again), and CALLING -> RECORDED removed (a call cancelled in flight could not record its
    end): each seen failing here."""
    record = CallRecord(attempt("att-1"), phase=src)
    allowed = (str(src), str(dst)) in EXPECTED_MOVES
    assert call_can_move(src, dst) is allowed
    if allowed:
        record.move(dst)
        assert record.phase is dst
        return
    with pytest.raises(InvalidTransition) as refused:
        record.move(dst)
    assert record.phase is src
    assert (refused.value.entity_id, refused.value.src, refused.value.dst) == ("att-1", src, dst)


@pytest.mark.parametrize("phase", list(CallPhase))
def test_each_phase_declares_its_flags(phase: CallPhase) -> None:
    """Mutant: UNBUILT among the phases whose request may be out (a call that sent nothing
    never adopted again, left for its lease to end `unknown`), seen failing here."""
    assert (phase.terminal, phase.recording, phase.request_out) == EXPECTED_FLAGS[phase]


def test_a_refused_move_says_what_the_phase_means_and_where_it_may_go() -> None:
    with pytest.raises(InvalidTransition) as answered:
        CallRecord(attempt("att-1"), phase=CallPhase.ANSWERED).move(CallPhase.CALLING)
    assert str(answered.value) == (
        "attempt call att-1 cannot go from answered to calling: its provider answered and "
        "that outcome is being recorded; it may only become recorded"
    )
    with pytest.raises(InvalidTransition) as recorded:
        CallRecord(attempt("att-1"), phase=CallPhase.RECORDED).move(CallPhase.NOT_CALLED)
    assert "its end is already recorded; nothing follows" in str(recorded.value)


def attempt(attempt_id: str) -> Attempt:
    return Attempt(
        id=attempt_id,
        job_id="job-1",
        seq=1,
        provider="a",
        state=AttemptState.STARTED,
        started_at=datetime.now(UTC),
    )


@asynccontextmanager
async def one_started_attempt(tmp_path: Path) -> AsyncIterator[tuple[JobDriver, Attempt, Router]]:
    """A driver (the engine's parts) of a job this worker claimed, with one `started` attempt
    this worker wrote on `a`; the engine itself never drives the job (its claim is held)."""
    a = FakeProvider("a")
    cfg = config(post=shared(attempt_timeout=30.0))
    async with Router.open(url(tmp_path), cfg, providers={"a": a, "b": a}) as router:
        engine = router.engine
        assert engine is not None
        job = await create_job(
            router.store,
            owner="shop",
            idempotency_key="k1",
            task="post",
            input={"product": "tea"},
            params={},
            deadline_s=60,
            claimed_by=engine.worker_id,
            claim_s=600,
        )
        job, started = await router.store.jobs.start_attempt(
            job.id, provider="a", model=None, worker=engine.worker_id, lease_s=600, exclusive=False
        )
        driver = JobDriver(
            job,
            engine.tasks["post"],
            store=router.store.jobs,
            health=engine.health,
            providers=engine.providers,
            worker=engine.worker,
            spending=engine.spending,
        )
        driver.attempts = [started]
        yield driver, started, router
        assert a.calls == []  # no decision here ever calls the provider


async def forever() -> None:
    await asyncio.Event().wait()


async def fails() -> None:
    raise OSError("the store is gone: the unbuilt call's end could not be recorded")


def in_flight(driver: JobDriver, started: Attempt, phase: CallPhase, work: Awaitable[None]) -> Any:
    """A call of `started` in `phase` whose task runs `work`, as `JobDriver._launch` holds it."""
    record = CallRecord(started, phase=phase)
    record.task = asyncio.ensure_future(work)
    driver.worker.in_hand.hold(record)
    driver.in_flight[started.id] = record
    return record


async def row_of(router: Router, started: Attempt) -> Attempt:
    [row] = await router.attempts(started.job_id)
    assert row.id == started.id
    return row


async def test_a_stop_records_a_call_whose_task_never_ran_not_called(tmp_path: Path) -> None:
    """`written`, its task not run yet: stopped, and recorded `not called` (cancelled,
    not_sent: nothing was sent), not left `started` for its lease to end `unknown`.
    Mutant: `CallPhase.unsent` false for WRITTEN (`self is CallPhase.UNBUILT`): the attempt
    stays `started`, seen failing."""
    async with one_started_attempt(tmp_path) as (driver, started, router):
        record = in_flight(driver, started, CallPhase.WRITTEN, forever())
        await driver._stop_in_flight("the job ended before this attempt answered")
        row = await row_of(router, started)
    assert record.task.cancelled()
    assert record.phase is CallPhase.NOT_CALLED
    assert (row.state, row.error_kind, row.error) == (
        AttemptState.CANCELLED,
        "not_sent",
        NOT_CALLED,
    )
    assert driver.worker.in_hand.never_called(started.id)


@pytest.mark.parametrize("reason", [None, "the job ended before this attempt answered"])
async def test_a_stop_cancels_a_call_in_flight_and_leaves_its_end_to_it(
    tmp_path: Path, reason: str | None
) -> None:
    """`calling` (the request may be out): cancelled with the driver's reason (none when the
    router stops: the call then records `unknown`, I3), and never recorded `not called` by the
    driver, which would say nothing was sent. Its end is the call's own: the stand-in records
    none, so the row stays `started`, and the call is kept in hand (never adopted).
    Mutants: `CallPhase.stoppable` false for CALLING (the call not cancelled: the stop waits
    on it forever, failed by the per-test timeout), and `CallPhase.unsent` true for CALLING
    (`not self.terminal`: the row `cancelled`, "nothing was sent"), each seen failing."""
    async with one_started_attempt(tmp_path) as (driver, started, router):
        record = in_flight(driver, started, CallPhase.CALLING, forever())
        await driver._stop_in_flight(reason)
        row = await row_of(router, started)
    assert record.task.cancelled()
    assert record.cancel_reason == reason
    assert record.phase is CallPhase.CALLING and row.state is AttemptState.STARTED
    assert not driver.worker.in_hand.never_called(started.id)


async def test_a_stop_never_cancels_an_answer_being_recorded(tmp_path: Path) -> None:
    """`answered`: its outcome is being written; the stop waits for it and cancels nothing
    (I7). Mutant: `CallPhase.stoppable` true for ANSWERED (`not self.terminal`): the record's
    task cancelled, seen failing."""
    release = asyncio.Event()
    recorded: list[str] = []

    async def recording() -> None:
        await release.wait()
        recorded.append("written")

    async with one_started_attempt(tmp_path) as (driver, started, router):
        record = in_flight(driver, started, CallPhase.ANSWERED, recording())
        stop = asyncio.ensure_future(driver._stop_in_flight(None))
        await wait_turns(stop.done, 50)
        release.set()
        async with asyncio.timeout(SETTLE):
            await stop
        row = await row_of(router, started)
    assert not record.task.cancelled() and recorded == ["written"]
    assert record.cancel_reason is None and row.state is AttemptState.STARTED


async def test_a_stop_records_an_unbuilt_call_whose_end_was_lost_not_called(
    tmp_path: Path,
) -> None:
    """`unbuilt` (its request could not be built) whose record failed: nothing was sent, so
    the stop records it `not called` rather than leave it `started` to end `unknown`.
    Mutant: `CallPhase.unsent` true only for WRITTEN, seen failing."""
    async with one_started_attempt(tmp_path) as (driver, started, router):
        record = in_flight(driver, started, CallPhase.UNBUILT, fails())
        await driver._stop_in_flight(None)
        row = await row_of(router, started)
    assert not record.task.cancelled()
    assert (row.state, row.error_kind) == (AttemptState.CANCELLED, "not_sent")
    assert record.phase is CallPhase.NOT_CALLED


async def test_a_stop_leaves_a_recorded_call_alone(tmp_path: Path) -> None:
    async with one_started_attempt(tmp_path) as (driver, started, router):
        record = in_flight(driver, started, CallPhase.RECORDED, asyncio.sleep(0))
        await driver._stop_in_flight(None)
        row = await row_of(router, started)
    assert not record.task.cancelled() and row.state is AttemptState.STARTED


async def wait_turns(stop: Callable[[], bool], count: int) -> None:
    """Give the loop `count` turns (the stop needs a few to cancel, none to finish); fail if
    `stop` came true meanwhile."""
    for _ in range(count):
        await asyncio.sleep(0)
        assert not stop(), "the stop ended while the answer was being recorded"


@pytest.mark.parametrize(
    ("phase", "adopted"),
    [
        (CallPhase.WRITTEN, True),  # its task ended before the call began: nothing sent
        (CallPhase.UNBUILT, True),  # its request could not be built: nothing sent
        (CallPhase.CALLING, False),  # the request may be out: calling again could do it twice
        (CallPhase.ANSWERED, False),  # answered, its record lost: never called again (I3)
    ],
)
async def test_adoption_calls_only_an_attempt_whose_request_never_left(
    tmp_path: Path, phase: CallPhase, adopted: bool
) -> None:
    """A `started` attempt of this worker whose call's task ended in `phase` without an end
    recorded: the next driver adopts it only if its request never left.
    Mutants: `CallPhase.request_out` false for CALLING (calling again a request that may have
    run), `InHand.let_go` keeping every record (an unsent attempt left for its lease to end
    `unknown`), each seen failing."""
    async with one_started_attempt(tmp_path) as (driver, started, _):
        record = CallRecord(started, phase=phase)
        record.task = asyncio.ensure_future(asyncio.sleep(0))
        driver.worker.in_hand.hold(record)
        await record.task
        driver.worker.in_hand.let_go(record)  # as the call's own `run` does when it ends
        driver._adopt_orphans()
        launched = driver.in_flight.pop(started.id, None)
        if launched is not None:  # stopped before it runs: no call is made here
            launched.task.cancel()
            await asyncio.wait({launched.task})
            driver.worker.in_hand.let_go(launched)
    assert (launched is not None) is adopted
    if launched is not None:
        assert launched is not record and launched.phase is CallPhase.WRITTEN


async def test_adoption_never_calls_an_attempt_whose_task_is_still_here(tmp_path: Path) -> None:
    """A call of this worker not called yet, its task still pending (another driver's launch):
    not an orphan. Mutant: `InHand.never_called` reading only the held record's phase
    (`record is None or not record.phase.request_out`), seen failing."""
    async with one_started_attempt(tmp_path) as (driver, started, _):
        record = CallRecord(started)
        record.task = asyncio.ensure_future(forever())
        driver.worker.in_hand.hold(record)
        driver._adopt_orphans()
        record.task.cancel()
        await asyncio.wait({record.task})
    assert started.id not in driver.in_flight
