"""How often a worker claims (router/pace.py): every mode against every claim outcome."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobrouter import Router
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from jobrouter.pace import BUSY_POLL_S, Pace
from jobrouter.states import JobState
from tests.support.fakes import FakeProvider
from tests.support.store_jobs import create_job

A, P, B = Pace.AWAIT, Pace.POLL, Pace.BUSY
FULL = -1  # no free slot: nothing claimed, nothing tried
GUARD_S = 60.0  # against a hang only: the woken claim takes milliseconds

# (mode, claimed, quiet) -> next mode. Where claims wait on the server (PostgreSQL) the quiet
# mode is AWAIT, else (SQLite) POLL; a worker is only ever quiet or busy.
TABLE = {
    (A, FULL, A): A,
    (A, 0, A): A,
    (A, 1, A): A,
    (A, 2, A): B,
    (A, 6, A): B,
    (P, FULL, P): P,
    (P, 0, P): P,
    (P, 1, P): P,
    (P, 2, P): B,
    (P, 5, P): B,
    (B, FULL, A): B,
    (B, FULL, P): B,
    (B, 0, A): A,
    (B, 0, P): P,
    (B, 1, A): B,
    (B, 1, P): B,
    (B, 4, A): B,
    (B, 3, P): B,
}


@pytest.mark.parametrize(("mode", "claimed", "quiet"), list(TABLE))
def test_every_mode_and_claim_outcome(mode: Pace, claimed: int, quiet: Pace) -> None:
    assert mode.after(claimed, quiet) is TABLE[(mode, claimed, quiet)]


def test_a_polling_worker_claims_every_poll_and_a_busy_one_fast() -> None:
    assert B.timeout(0.5) == BUSY_POLL_S and P.timeout(0.5) == 0.5
    assert B.timeout(0.02) == 0.02  # never slower than the configured poll
    assert P.timeout(0.5, rest=True) == 0.5


def test_an_awaiting_worker_claims_at_once_unless_its_last_claim_could_not_run() -> None:
    """Its claim waits on the server, so it does not wait before it; after a claim that could
    not run (no free slot, or a failure) it rests `poll_s` instead of spinning."""
    assert A.timeout(0.5) == 0.0
    assert A.timeout(0.5, rest=True) == 0.5
    assert B.timeout(0.5, rest=True) == BUSY_POLL_S


async def test_a_polling_worker_woken_in_its_process_claims_at_once(tmp_path: Path) -> None:
    """SQLite: nothing from another process wakes a worker, which claims every `poll_s` (an
    hour here); `Engine.wake` (a job reopened, leases expired) makes it claim at once."""
    cfg = RouterConfig(
        tasks={"t": TaskConfig(providers=["a"], side_effects="none", certification="none")},
        engine=EngineConfig(poll_interval=3600.0),
    )
    url = f"sqlite:///{tmp_path / 'r.db'}"
    async with Router.open(url, cfg, providers={"a": FakeProvider("a")}) as router:
        assert router.engine is not None
        # Committed as another process would: queued, unclaimed, no wake-up in this process.
        job = await create_job(
            router.store,
            owner="shop",
            idempotency_key="k",
            task="t",
            input={"product": "tea"},
            params={},
            deadline_s=None,
            claimed_by=None,
            claim_s=30.0,
        )
        router.engine.wake()
        done = await router.wait(job.id, GUARD_S)
    assert done.state is JobState.SUCCEEDED
