"""Issue 27 on a PostgreSQL fleet of real `jobrouter worker` processes: two workers on one
database, fault servers A (primary, drifting: every answer broken JSON) and B (backup), both
certified from this test through the Python API into that database. The jobs are this test's
(a router that runs no workers), so every answer is the workers'; the leader, whichever worker
it is, suspends A from the fleet's evidence, and then the jobs that BOTH workers run send A no
request at all (the fault servers' own counts)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from jobrouter import Router
from jobrouter.certifier import certify_pair, pairs_to_certify
from jobrouter.providers import _litellm
from jobrouter.states import EventKind, JobState
from tests.acceptance.test_live_watch import BROKEN, CONTRACT, GOOD
from tests.providers.fault_server import FaultServer, start_fault_server
from tests.store.pg import fresh_database

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parents[3]
SETTLE_S = 120.0  # a guard only: two worker processes on a busy 2-core machine
BATCH = 12  # jobs submitted at once: more than one worker's concurrency, so both take some
CONFIG = """\
[providers.A]
model = "openai/fault-model"
api_base = "{a}"
context_window = 2048

[providers.B]
model = "openai/fault-model"
api_base = "{b}"
context_window = 2048

[tasks.title]
contract = "{contract}"
providers = ["A", "B"]

[engine]
workers = 2
poll_interval = 0.05
sweep_interval = 0.2

[leader]
heartbeat = 0.2

[certification.watch]
interval = 0.05
probes_per_hour = 0
"""


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


@pytest.fixture
def servers() -> Iterator[dict[str, FaultServer]]:
    with ExitStack() as stack:
        yield {name: stack.enter_context(start_fault_server()) for name in ("A", "B")}


@pytest.fixture
def config(tmp_path: Path, servers: dict[str, FaultServer]) -> Path:
    for server in servers.values():
        server.reset(content=GOOD)
    contract = tmp_path / "titles.yaml"
    contract.write_text(CONTRACT)
    path = tmp_path / "jobrouter.toml"
    path.write_text(
        CONFIG.format(a=servers["A"].api_base, b=servers["B"].api_base, contract=contract)
    )
    return path


@pytest.fixture
def workers(tmp_path: Path, config: Path, pg_url: str) -> Iterator[list[Path]]:
    """Two `jobrouter worker` processes; their log files."""
    started, logs = [], []
    for n in range(2):
        log = tmp_path / f"worker{n}.log"
        with log.open("wb") as out:  # the child keeps its own descriptor
            command = [sys.executable, "-m", "jobrouter", "worker", "--config", str(config)]
            process = subprocess.Popen(
                [*command, "--database", pg_url], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
            )
        started.append(process)
        logs.append(log)
    yield logs
    for process in started:
        process.kill()
        process.wait(timeout=30)


async def certify_both(router: Router) -> None:
    for pair in pairs_to_certify(router.config, router.tasks):
        await certify_pair(
            router.store.certifications, router.providers[pair.provider], pair, ttl_days=1
        )
    await _litellm.close_clients()


async def batch(router: Router, prefix: str) -> list[tuple[str, list[tuple[str, str]], bool]]:
    """Submit BATCH jobs at once and wait for them all: for each, the winner's worker, the
    (provider, worker) of each attempt, and whether a decision skipped A as suspended."""
    jobs = [
        await router.submit("shop", f"{prefix}-{i}", "title", {"product": "Blue mug"})
        for i in range(BATCH)
    ]
    settled = await asyncio.gather(*(router.wait(job.id, timeout=SETTLE_S) for job in jobs))
    seen = []
    for job in settled:
        assert job.state is JobState.SUCCEEDED, job.error  # A broke it, B took it
        attempts = await router.attempts(job.id)
        [winner] = [a for a in attempts if a.id == job.winner_attempt_id]
        assert winner.provider == "B"
        skipped = any(
            event.kind is EventKind.PROVIDER_SKIPPED
            and event.data.get("provider") == "A"
            and "suspended for contract 'titles'" in str(event.data.get("reason"))
            for event in await router.events(job.id)
        )
        seen.append((winner.worker, [(a.provider, a.worker) for a in attempts], skipped))
    return seen


async def test_both_workers_stop_using_a_provider_the_fleet_suspended(
    config: Path, pg_url: str, servers: dict[str, FaultServer], workers: list[Path]
) -> None:
    """mutant: the gate's suspension branch removed (router/gate.py): no worker refuses A.
    mutant: the gate's read keeps its old suspensions (`self._suspended = suspended` dropped):
    no worker refuses A."""
    async with Router.open(pg_url, config, run_workers=False) as router:
        await certify_both(router)
        servers["A"].control(
            reset=True, content=GOOD, default={"kind": "answer", "content": BROKEN}
        )
        servers["B"].control(
            reset=True, content=GOOD, default={"kind": "delay", "seconds": 0.2, "content": GOOD}
        )
        rounds = 0
        while ("A", "titles") not in await router.store.certifications.list_suspensions():
            assert rounds < 10, "A was never suspended"
            await batch(router, f"drift-{rounds}")
            rounds += 1
        # Each worker's gate sees the suspension at its next refresh (2 s): wait until each
        # has decided a job skipping A as suspended (the job's own event log).
        refusing: set[str] = set()
        while len(refusing) < 2:
            assert rounds < 40, f"only {refusing} refused A"
            found = await batch(router, f"settle-{rounds}")
            refusing |= {worker for worker, attempts, skipped in found if skipped}
            rounds += 1
        before = {name: int(s.stats()["total"]) for name, s in servers.items()}
        found = await batch(router, "after")
        after = {name: int(s.stats()["total"]) for name, s in servers.items()}
    assert {worker for worker, _, _ in found} == refusing  # both workers ran these jobs
    assert all([provider for provider, _ in attempts] == ["B"] for _, attempts, _ in found)
    assert after["A"] - before["A"] == 0
    assert after["B"] - before["B"] == BATCH
