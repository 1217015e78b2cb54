"""The real server as a subprocess on 127.0.0.1 (see serve_fixture.py), tokens made by the
real CLI, and the database file for counting what really happened."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = Path(__file__).with_name("contracts") / "echo.yaml"
STARTUP_S = 300.0  # a guard only: the server imports litellm, seconds of CPU under load

CONFIG = """
[database]
url = "sqlite:///{db}"

[certification]
required = false

[http]
heartbeat = {heartbeat}
max_body_bytes = 65536

[tasks.echo]
contract = "{contract}"
providers = ["fast"]

[tasks.slow]
contract = "{contract}"
providers = ["slow"]

[tasks.gate]
contract = "{contract}"
providers = ["gate"]
attempt_timeout = 600

[tasks.hang]
contract = "{contract}"
providers = ["hang"]
max_attempts = 1
attempt_timeout = 0.3
"""


@dataclass
class Server:
    url: str
    port: int
    db: Path
    config: Path
    process: subprocess.Popen[bytes]

    def token(self, owner: str, *, operator: bool = False) -> str:
        """A token made by `jobrouter token create` (the real CLI, as a subprocess)."""
        args = ["token", "create", owner, "--config", str(self.config)]
        if operator:
            args.append("--operator")
        done = subprocess.run(
            [sys.executable, "-c", "from jobrouter.cli import main; main()", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        return done.stdout.strip()

    def count(self, sql: str, *params: object) -> int:
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as conn:
            return int(conn.execute(sql, params).fetchone()[0])


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `jobrouter` CLI as a subprocess on `config`, with none of this environment's
    $JOBROUTER_* variables and 200 columns (a table is not narrowed)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JOBROUTER_")}
    return subprocess.run(
        [sys.executable, "-m", "jobrouter", *args, "-c", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,  # a guard only
        env={**environment, "COLUMNS": "200"},
    )


def start_server(
    folder: Path,
    *,
    heartbeat: float = 0.2,
    extra_config: str = "",
    database_url: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    wait_ready: bool = True,
) -> Server:
    """The server on a SQLite file in `folder`, or on `database_url` (PostgreSQL); `args` and
    `env` go to serve_fixture; returned once ready, or once listening without `wait_ready`."""
    db = folder / "jobs.db"
    config = folder / "jobrouter.toml"
    text = CONFIG.format(db=db, contract=CONTRACT, heartbeat=heartbeat) + extra_config
    if database_url is not None:
        text = text.replace(f'url = "sqlite:///{db}"', f'url = "{database_url}"')
    config.write_text(text)
    with (folder / "server.log").open("wb") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.acceptance.serve_fixture",
                "--config",
                str(config),
                *args,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, **(env or {})},
        )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not line.startswith("PORT "):
        process.kill()
        process.wait()
        process.stdout.close()
        raise RuntimeError(f"server did not start: {line!r}; see {folder / 'server.log'}")
    port = int(line.split()[1])
    server = Server(f"http://127.0.0.1:{port}", port, db, config, process)
    if wait_ready:
        wait_for(server, "/health/ready")
    return server


def stop_server(server: Server) -> None:
    """SIGTERM, and the server must stop cleanly: streams closed, router closed, exit 0."""
    server.process.terminate()
    try:
        code = server.process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        server.process.kill()
        code = server.process.wait()
    finally:
        if server.process.stdout is not None:
            server.process.stdout.close()
    assert code == 0, f"the server did not stop cleanly (exit {code})"


def wait_for(server: Server, path: str) -> None:
    """Until `path` answers 200 (/health/ready, /health/live); a deadline guards a hang only."""
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited with {server.process.returncode}")
        try:
            if httpx.get(f"{server.url}{path}", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server: {path} not 200 in time")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("server"))
    try:
        yield running
    finally:
        stop_server(running)
