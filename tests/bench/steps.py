"""Where a job's CPU goes, per step of its path: a CPU-time sampling profile of one jobrouter
scenario run in this process (SQLite, workers here), the samples added up by step.

    python -m tests.bench.steps --concurrency 64 --jobs 3000 --transport openai

Starts the stub (tests/bench/stub_server.py) unless `--stub-port` names one. Every 0.5 ms of
the process's CPU time (`ITIMER_PROF`: every thread's, user and system; the kernel rounds the
interval up to its tick, 4 ms on the 2-core machine, so 3000 jobs give about 2000 samples) a
signal handler looks at the main thread's stack; the innermost frame that is one of `STEPS`
names the step. The
handler runs between two bytecodes, so the CPU of a C call (a SQLite statement, the JSON
encoder) is counted where it returns, and CPU spent on another thread (a COMMIT's fsync) is
counted wherever the main thread was: the figures are samples (a step of 5% is good to about
a tenth of itself at 3000 jobs), not a measurement of each call. The profiler costs a few
percent; the per-step figures are scaled to the run's own CPU per job.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import tempfile
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

from tests.bench import scenarios
from tests.bench.__main__ import start_stub

# (step, file the function is in, function): the innermost match on the stack wins.
STEPS = [
    ("submit: door: input schema", "door.py", "_check_input"),
    ("submit: door: render the request", "tasks.py", "build_request"),
    ("submit: door: shape, size, params", "door.py", "admit"),
    ("submit: eligibility, first attempt", "engine.py", "_launch"),
    ("submit: insert job, attempt, events", "jobs.py", "create_and_start"),
    ("submit: the rest of Router.submit", "api.py", "submit"),
    ("wait", "api.py", "wait"),
    ("start: the driver (step, span, tasks)", "driver.py", "run"),
    ("call: provider.complete (as the peer)", "adapter.py", "complete"),
    ("validate the output", "tasks.py", "output_problems"),
    ("finish: outbox row", "transitions.py", "write_outbox"),
    ("finish: the CAS transaction", "attempts.py", "finish_attempt_cas"),
    ("attempt: span, request copy, health", "attempt_call.py", "run"),
    ("write tx: begin, batch, hand-off", "sqlite.py", "_write"),
    ("commit (inline) and its callbacks", "sqlite.py", "_commit_when_idle"),
    ("commit callbacks", "connector.py", "run_callbacks"),
]
IDLE = "idle loop (CPU of other threads)"
OTHER = "event loop, asyncio, other"
INTERVAL_S = 0.0005


class Sampler:
    def __init__(self) -> None:
        self.samples: Counter[str] = Counter()
        self.on = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.on and frame is not None:
            self.samples[step_of(frame)] += 1


def step_of(frame: FrameType) -> str:
    """The step of the innermost frame on the stack that names one."""
    top: FrameType | None = frame
    while top is not None:
        code = top.f_code
        for step, file, function in STEPS:
            if code.co_name == function and code.co_filename.endswith(file):
                return step
        top = top.f_back
    if frame.f_code.co_name in ("select", "poll") and "selectors" in frame.f_code.co_filename:
        return IDLE
    return OTHER


def profile(args: argparse.Namespace) -> tuple[dict[str, Any], Counter[str]]:
    sampler = Sampler()
    drive = scenarios.drive

    async def sampled_drive(
        call: Any, jobs: int, concurrency: int, stub_pid: int | None, started: Any = None
    ) -> dict[str, Any]:
        def start() -> None:
            if started is not None:
                started()
            sampler.on = True

        try:
            return await drive(call, jobs, concurrency, stub_pid, start)
        finally:
            sampler.on = False

    scenarios.drive = sampled_drive
    signal.signal(signal.SIGPROF, sampler)
    signal.setitimer(signal.ITIMER_PROF, INTERVAL_S, INTERVAL_S)
    try:
        url = f"sqlite:///{tempfile.mkdtemp(prefix='jobrouter-steps-')}/bench.db"
        run: Callable[[], Any] = lambda: scenarios.run_jobrouter(args, url, 0, args.transport)  # noqa: E731
        figures = asyncio.run(run())
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        scenarios.drive = drive
    return figures, sampler.samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--transport", choices=["openai", "litellm"], default="openai")
    parser.add_argument("--stub-port", type=int, default=0)
    options = parser.parse_args()
    stub = None
    if not options.stub_port:
        stub, options.stub_port = start_stub()
    args = argparse.Namespace(
        stub_port=options.stub_port,
        stub_pid=None,
        jobs=options.jobs,
        concurrency=options.concurrency,
        contract=True,
        statements=None,
        profile=None,
        prefill=0,
        transport=options.transport,
    )
    try:
        figures, samples = profile(args)
    finally:
        if stub is not None:
            stub.terminate()
    total = sum(samples.values()) or 1
    scale = figures["cpu_ms_per_job"] / total
    print(f"{figures['cpu_ms_per_job']:.3f} ms of CPU a job, {total} samples")
    for step, count in samples.most_common():
        print(f"| {step} | {count * scale:.3f} | {100 * count / total:.1f}% |")


if __name__ == "__main__":
    main()
