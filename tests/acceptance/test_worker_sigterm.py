"""A `jobrouter worker` on PostgreSQL stops on SIGTERM sent right after a burst of jobs, the
moment a worker stopped by the benchmark once hung in: its poller, busy during the burst, goes
back to listening and wakes itself to claim once more, and a cancel landing in the loop turns
after that wake-up was lost (Python 3.11's `asyncio.wait_for`), so `Engine.stop` waited for
the poller forever. The exact loop turn cannot be aimed at from another process: this test
runs the real path (signal, `Router.close`, engine, leader, listener, pool) in that state;
tests/unit/test_stop_when_woken.py hits the turn itself, deterministically."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from jobrouter import Router
from jobrouter.states import JobState
from tests.bench.scenarios import bench_config
from tests.store.pg import fresh_database

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parents[2]
GUARD_S = 120.0  # a guard against a hang only: the worker exits in well under a second
JOBS = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def stub_port() -> Iterator[int]:
    """The benchmark's OpenAI-compatible stub (tests/bench/stub_server.py), over real HTTP."""
    port = free_port()
    stub = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.stub_server", "--port", str(port)], cwd=ROOT
    )
    try:
        while stub.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), 1.0).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        stub.kill()
        stub.wait()


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


def start_worker(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as err:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "jobrouter", "worker", "--config", str(config)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=err,
        )


def drain(worker: subprocess.Popen[bytes], said: list[bytes], ready: threading.Event) -> None:
    """Read the worker's stdout to its end (a full pipe would block it); `ready` is set on its
    "worker <id> on <url>" line, printed once it takes jobs, or when the output ends first."""
    assert worker.stdout is not None
    for line in worker.stdout:
        if line.startswith(b"worker "):
            said.append(line)
            ready.set()
    ready.set()


def tail(log: Path) -> str:
    return log.read_text("utf-8", errors="replace")[-3000:]


async def exit_status(worker: subprocess.Popen[bytes]) -> int | None:
    """The worker's exit status, or None if it is still running after GUARD_S (then killed)."""
    try:
        return await asyncio.to_thread(worker.wait, GUARD_S)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
        return None


async def test_a_worker_sent_sigterm_right_after_a_burst_exits_with_every_job_done(
    tmp_path: Path,
    stub_port: int,
    pg_url: str,
) -> None:
    config = tmp_path / "jobrouter.toml"
    config.write_text(bench_config(stub_port, pg_url, contract=False))
    log = tmp_path / "worker.log"
    worker = start_worker(config, log)
    said: list[bytes] = []
    ready = threading.Event()
    drainer = threading.Thread(target=drain, args=(worker, said, ready), daemon=True)
    drainer.start()
    try:
        await asyncio.to_thread(ready.wait)
        assert said, f"the worker did not start; its log: {tail(log)}"
        async with await Router.open(pg_url, config, run_workers=False) as router:
            run = uuid.uuid4().hex[:8]
            jobs = await asyncio.gather(
                *(
                    router.submit("bench", f"{run}-{n}", "bench", {"product": {"name": f"tea {n}"}})
                    for n in range(JOBS)
                )
            )
            done = await asyncio.gather(*(router.wait(job.id, GUARD_S) for job in jobs))
            worker.send_signal(signal.SIGTERM)  # at once: the poller is just leaving its burst
            status = await exit_status(worker)
            assert status == 0, f"no exit on SIGTERM (status {status}); log: {tail(log)}"
            assert [job.state for job in done] == [JobState.SUCCEEDED] * JOBS
            after = [await router.get(job.id) for job in jobs]
            assert all(job.state is JobState.SUCCEEDED for job in after)
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait()
        drainer.join()
        assert worker.stdout is not None
        worker.stdout.close()
