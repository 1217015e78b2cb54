"""Start-up times of the CLI and of `jobrouter serve` (docs/benchmarks.md, "Start-up"):

    python -m tests.bench.startup [--runs 5] [--cached-bytecode]

Each CLI command runs as a fresh `python -m jobrouter` process on a small SQLite database with
`cassettes/jobrouter.toml` (five tasks on litellm providers); the table gives the median and
minimum wall time, the median CPU time of the process (user + system), its exit codes, and
from one more run under tests/support/cli_probe.py whether litellm was imported and whether a
leader, workers, the outbox delivery, a periodic task or a warm-up started (the quick commands
of issue 30 must do neither). Commands that change a job get a fresh one each run (a new key
to submit, a queued job to cancel, an unknown attempt to resolve, a live token to revoke). For
serve: the time from spawning the process to the first 200 of /health/live, and to the log line
that says the providers are warmed up and the workers started. The load average before and
after is printed: on a shared machine, wall time is mostly waiting for a core.

Python's bytecode cache is printed too. With `PYTHONDONTWRITEBYTECODE=1` in the environment (as
on the CI and development machines) every start compiles jobrouter's own modules again; an
installed wheel has them compiled. `--cached-bytecode` measures that: the cache is kept in a
temporary folder (`PYTHONPYCACHEPREFIX`) and each command runs once, untimed, to fill it."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from jobrouter.store import open_store
from tests.support.store_jobs import leave_unknown

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "cassettes" / "jobrouter.toml"
LISTING = '{"listing": "Matcha bowl, handmade"}'
# What a command that runs jobs starts (router/engine.py, leader.py, outbox.py, api.py).
RUNNING = {
    "jobrouter-dispatch",
    "jobrouter-poll",
    "jobrouter-heartbeat",
    "jobrouter-leader",
    "jobrouter-outbox",
    "jobrouter-nats",
    "jobrouter-warm-up",
}
# Each command as its label and its arguments; `{job}` is one queued job's id, `{fresh_key}`,
# `{queued}`, `{unknown}` and `{token}` a new one per run (a key, a queued job, an unknown
# attempt, a live token's id).
COMMANDS: list[tuple[str, list[str]]] = [
    ("--help", ["--help"]),
    (
        "submit (accepted, --wait 0)",
        ["submit", "-t", "title", "-k", "{fresh_key}", "-i", LISTING, "--wait", "0"],
    ),
    (
        "submit (replay, --wait 0)",
        ["submit", "-t", "title", "-k", "k0", "-i", LISTING, "--wait", "0"],
    ),
    ("submit (refused input)", ["submit", "-t", "title", "-k", "bad", "-i", "{}"]),
    ("show JOB_ID", ["show", "{job}"]),
    ("find KEY", ["find", "k0"]),
    ("jobs list", ["jobs", "list"]),
    ("cancel JOB_ID", ["cancel", "{queued}"]),
    ("resolve ATTEMPT_ID --outcome failed", ["resolve", "{unknown}", "--outcome", "failed"]),
    ("token create OWNER", ["token", "create", "shop"]),
    ("token list", ["token", "list"]),
    ("token revoke TOKEN_ID", ["token", "revoke", "{token}"]),
    ("config check", ["config", "check"]),
    ("outbox", ["outbox"]),
    ("contracts status", ["contracts", "status"]),
]


def _db(folder: Path) -> str:
    return f"sqlite:///{folder}/jobs.db"


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _environment(folder: Path, cached_bytecode: bool) -> dict[str, str]:
    env = {**os.environ, "JOBROUTER_CONFIG": str(CONFIG), "COLUMNS": "200"}
    if cached_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    return env


def _bytecode(env: dict[str, str]) -> str:
    if env.get("PYTHONDONTWRITEBYTECODE"):
        return "compiled at every start (PYTHONDONTWRITEBYTECODE is set)"
    where = env.get("PYTHONPYCACHEPREFIX")
    return f"cached ({where})" if where else "cached (__pycache__ beside the sources)"


def _cli(
    args: list[str], folder: Path, env: dict[str, str], probe: Path | None = None
) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system, of the child alone) and the exit code."""
    command = [
        sys.executable,
        *(["-m", "tests.support.cli_probe", str(probe)] if probe else ["-m", "jobrouter"]),
        *args,
        *([] if args == ["--help"] or args[0] == "config" else ["-d", _db(folder)]),
    ]
    began, cpu = time.perf_counter(), _cpu()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    return time.perf_counter() - began, _cpu() - cpu, done.returncode


class Fixtures:
    """The jobs the commands act on, made through the store."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.keys = (f"fresh-{n}" for n in itertools.count())

    def job(self, key: str) -> str:
        return asyncio.run(self._make(key, unknown=False))

    def unknown(self, key: str) -> str:
        return asyncio.run(self._make(key, unknown=True))

    def token(self) -> str:
        return asyncio.run(self._token())

    async def _token(self) -> str:
        store = await open_store(_db(self.folder))
        try:
            _, record = await store.tokens.create_token("shop")
            return record.id
        finally:
            await store.close()

    async def _make(self, key: str, *, unknown: bool) -> str:
        store = await open_store(_db(self.folder))
        try:
            job, _ = await store.jobs.create_and_start(
                owner="cli",
                idempotency_key=key,
                task="title",
                input=json.loads(LISTING),
                params={},
                deadline_s=None,
                claimed_by=None,
                claim_s=1.0,
            )
            if not unknown:
                return job.id
            _, attempt = await leave_unknown(store, job.id, provider="primary")
            return attempt.id
        finally:
            await store.close()

    def filler(self, first: str) -> Callable[[str], str]:
        makers = {
            "{job}": lambda: first,
            "{fresh_key}": lambda: next(self.keys),
            "{queued}": lambda: self.job(next(self.keys)),
            "{unknown}": lambda: self.unknown(next(self.keys)),
            "{token}": self.token,
        }
        return lambda arg: makers[arg]() if arg in makers else arg


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _serve(folder: Path, env: dict[str, str]) -> tuple[float, float]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = (folder / "serve.log").open("w")
    began = time.perf_counter()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobrouter",
            "serve",
            "--config",
            str(CONFIG),
            "-d",
            f"sqlite:///{folder}/jobs.db",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=log,
        cwd=folder,
        env=env,
    )
    live = warmed = 0.0
    try:
        while not warmed:
            if not live:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health/live", timeout=1).is_success:
                        live = time.perf_counter() - began
                except httpx.TransportError:
                    pass
            if "workers started" in (folder / "serve.log").read_text():
                warmed = time.perf_counter() - began
            time.sleep(0.01)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
    return live, warmed


def _probe(args: list[str], folder: Path, env: dict[str, str]) -> tuple[bool, bool]:
    report = folder / "probe.json"
    _cli(args, folder, env, probe=report)
    seen = json.loads(report.read_text())
    started = [t for t in seen["tasks"] if t in RUNNING or t.startswith("periodic-")]
    return "litellm" in seen["modules"], bool(started)


def main(runs: int, cached_bytecode: bool) -> None:
    print(f"load average before: {_load()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = _environment(folder, cached_bytecode)
        print(f"bytecode: {_bytecode(env)}")
        fixtures = Fixtures(folder)
        fill = fixtures.filler(fixtures.job("k0"))
        print(
            "| jobrouter command | median s | min s | median CPU s | runs | exit | "
            "imports litellm | starts workers |\n|---|---:|---:|---:|---:|---:|---|---|"
        )
        for label, template in COMMANDS:
            if cached_bytecode:  # untimed: compiles what this command imports into the cache
                _cli([fill(a) for a in template], folder, env)
            done = [_cli([fill(a) for a in template], folder, env) for _ in range(runs)]
            times, cpus = [t for t, _, _ in done], [c for _, c, _ in done]
            codes = sorted({code for _, _, code in done})
            imported, started = _probe([fill(a) for a in template], folder, env)
            print(
                f"| {label} | {statistics.median(times):.2f} | {min(times):.2f} | "
                f"{statistics.median(cpus):.2f} | {runs} | "
                f"{'/'.join(map(str, codes))} | {'yes' if imported else 'no'} | "
                f"{'yes' if started else 'no'} |"
            )
        serves = [_serve(folder, env) for _ in range(runs)]
        print(
            f"| serve: /health/live answers | {statistics.median(s[0] for s in serves):.2f} | "
            f"{min(s[0] for s in serves):.2f} | | {runs} | | in background | yes |"
        )
        print(
            f"| serve: litellm loaded, workers started | "
            f"{statistics.median(s[1] for s in serves):.2f} | "
            f"{min(s[1] for s in serves):.2f} | | {runs} | | yes | yes |"
        )
    print(f"load average after: {_load()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--cached-bytecode",
        action="store_true",
        help="keep Python's bytecode cache (as an installed wheel has it); default: as the "
        "environment says",
    )
    arguments = parser.parse_args()
    main(arguments.runs, arguments.cached_bytecode)
