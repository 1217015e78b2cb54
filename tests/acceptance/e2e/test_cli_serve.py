"""`jobrouter serve --config PATH --host H --port N` and `jobrouter token create`, as a user
runs them: real subprocesses of the real CLI."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.acceptance.conftest import ROOT

CLI = [sys.executable, "-c", "from jobrouter.cli import main; main()"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_answers_health_and_a_created_token(tmp_path: Path) -> None:
    config = tmp_path / "jobrouter.toml"
    config.write_text(f'[database]\nurl = "sqlite:///{tmp_path / "jobs.db"}"\n')
    token = subprocess.run(
        [*CLI, "token", "create", "cli-owner", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert token.stdout.strip().startswith("jr_") and "not shown again" in token.stderr
    port = free_port()
    with (tmp_path / "serve.log").open("wb") as log:
        server = subprocess.Popen(
            [*CLI, "serve", "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            stdout=log,
            stderr=log,
        )
    try:
        ready = _poll(f"http://127.0.0.1:{port}/health/ready")
        assert ready.json()["status"] == "ready"
        headers = {"Authorization": f"Bearer {token.stdout.strip()}"}
        found = httpx.get(
            f"http://127.0.0.1:{port}/v1/jobs",
            headers=headers,
            params={"idempotency_key": "nothing-yet"},
        )
        assert found.status_code == 200 and found.json()["items"] == []
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=120) == 0


def _poll(url: str, within: float = 300.0) -> httpx.Response:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            response = httpx.get(url, timeout=1)
            if response.status_code == 200:
                return response
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer 200 within {within}s")
