"""The `jobrouter worker` processes of a benchmark scenario: started before the clock, each
warm and taking jobs, and stopped (none outlives its run) after it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.bench import statements


def start_workers(
    config_file: Path, count: int, statements_dir: Path | None, profile: Path | None = None
) -> list[subprocess.Popen[bytes]]:
    """`jobrouter worker` processes (started before the clock runs: blocking is fine here);
    with `statements_dir`, each counts its statements (tests/bench/statements.py). Each worker
    writes a ready line once it takes jobs: the clock starts after every one has."""
    env = dict(os.environ)
    module = "jobrouter"
    if statements_dir is not None:
        env[statements.ENV] = str(statements_dir)
        module = "tests.bench.statements"
    if profile is not None:
        env[statements.PROFILE_ENV] = str(profile)
        module = "tests.bench.statements"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", module, "worker", "--config", str(config_file)],
            stdout=subprocess.PIPE,
            stderr=(config_file.parent / f"worker-{n}.log").open("wb"),
            env=env,
        )
        for n in range(count)
    ]
    for proc in procs:
        ready = threading.Event()
        threading.Thread(target=_drain, args=(proc, ready), daemon=True).start()
        if not ready.wait(120):
            stop_workers(procs, config_file.parent)
            raise RuntimeError("a worker did not start within 120 s")
    return procs


WORKER_STOP_S = 30.0  # a worker's SIGTERM grace is 10 s: one still running after this is stuck


def stop_workers(procs: list[subprocess.Popen[bytes]], logs: Path) -> None:
    """SIGTERM every worker and wait for it; one still running after WORKER_STOP_S is killed
    (SIGKILL), so that none outlives the run (its database is dropped next), and then fails
    the scenario, naming its log (`logs`/worker-<n>.log)."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    stuck = []
    for n, proc in enumerate(procs):
        try:
            proc.wait(WORKER_STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            stuck.append(f"pid {proc.pid} (its log: {logs / f'worker-{n}.log'})")
    if stuck:
        raise RuntimeError(
            f"worker {', '.join(stuck)} did not stop within {WORKER_STOP_S:.0f}s of SIGTERM: killed"
        )


def _drain(proc: subprocess.Popen[bytes], ready: threading.Event) -> None:
    """Read a worker's output to its end (a full pipe would block it); `ready` is set on its
    "worker <id> on <url>" line, printed once it is warm and taking jobs."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(b"worker "):
            ready.set()
