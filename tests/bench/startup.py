"""Start-up times of the CLI and of `jobrouter serve` (docs/benchmarks.md, "Start-up"):

    python -m tests.bench.startup [--runs 5]

Each CLI command runs as a fresh `python -m router` process on a small SQLite database with
`cassettes/jobrouter.toml` (five tasks on litellm providers); the table gives the median wall
time and whether litellm was imported (from `python -X importtime`). For serve: the time from
spawning the process to the first 200 of /health/live, and to the log line that says the
providers are warmed up and the workers started."""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "cassettes" / "jobrouter.toml"
COMMANDS = [
    ["--help"],
    ["show", "{job}"],
    ["jobs", "list"],
    ["config", "check"],
    ["outbox"],
    ["contracts", "status"],
]


def _cli(args: list[str], folder: Path, importtime: bool = False) -> tuple[float, str]:
    env = {**os.environ, "JOBROUTER_CONFIG": str(CONFIG), "COLUMNS": "200"}
    command = [
        sys.executable,
        *(["-X", "importtime"] if importtime else []),
        "-m",
        "jobrouter",
        *args,
        *([] if args == ["--help"] else ["-d", f"sqlite:///{folder}/jobs.db"]),
    ]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder, timeout=120)
    return time.perf_counter() - began, done.stderr


def _job(folder: Path) -> str:
    env = {**os.environ, "JOBROUTER_CONFIG": str(CONFIG)}
    code = (
        "import asyncio\nfrom jobrouter.store import open_store\n"
        "async def go():\n"
        f"    s = await open_store('sqlite:///{folder}/jobs.db')\n"
        "    j, _ = await s.jobs.create_and_start(owner='cli', idempotency_key='k', "
        "task='caption', input={}, params={}, deadline_s=None, claimed_by=None, "
        "claim_s=1.0)\n"
        "    print(j.id)\n    await s.close()\nasyncio.run(go())"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()


def _serve(folder: Path) -> tuple[float, float]:
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


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        job = _job(folder)
        print("| command | median s | runs | imports litellm |\n|---|---:|---:|---|")
        for args in COMMANDS:
            args = [job if a == "{job}" else a for a in args]
            times = [_cli(args, folder)[0] for _ in range(runs)]
            imported = any(
                line.split("|")[-1].strip() == "litellm"
                for line in _cli(args, folder, importtime=True)[1].splitlines()
            )
            label = " ".join(a if a != job else "JOB_ID" for a in args)
            print(
                f"| jobrouter {label} | {statistics.median(times):.2f} | {runs} | "
                f"{'yes' if imported else 'no'} |"
            )
        serves = [_serve(folder) for _ in range(runs)]
        print(
            f"| jobrouter serve: /health/live answers | "
            f"{statistics.median(s[0] for s in serves):.2f} | {runs} | in background |"
        )
        print(
            f"| jobrouter serve: litellm loaded, workers started | "
            f"{statistics.median(s[1] for s in serves):.2f} | {runs} | yes |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    main(parser.parse_args().runs)
