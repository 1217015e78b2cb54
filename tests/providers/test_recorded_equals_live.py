"""Recorded vs live, for every shipped certification cassette (issue 32): `jobrouter contracts
run --compare-recorded cassettes` against the real llama.cpp servers cassettes/jobrouter.toml
names, one pair per test; a pair whose live verdicts differ from its recording fails with both
outputs. Marked `live` (`pytest -m live tests/providers/test_recorded_equals_live.py` after
installing the [local] extra); the servers are started here one at a time on the recorded ports
(8081-8084: a cassette matches its port), so those ports must be free."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from jobrouter.config import load_config
from jobrouter.recordings import LIVE_RECORD

pytestmark = [pytest.mark.live, pytest.mark.timeout(1800)]  # CPU generation on 2 cores

ROOT = Path(__file__).resolve().parents[2]
CASSETTES = ROOT / "cassettes"
CONFIG = CASSETTES / "jobrouter.toml"
# The servers of cassettes/jobrouter.toml's header: port -> --chat-format (None: llama-2 fallback)
SERVERS: dict[int, str | None] = {8081: "gemma", 8082: "chatml", 8083: "gemma", 8084: None}


def _port(provider: str) -> int:
    port = urlsplit(load_config(CONFIG).providers[provider].api_base or "").port
    assert port in SERVERS, f"{provider}: no server on port {port} in SERVERS"
    return port


def _recorded() -> list[tuple[int, str, str]]:
    records = CASSETTES.glob(f"*/*/{LIVE_RECORD}")
    pairs = [(path.parent.parent.name, path.parent.name) for path in records]
    return sorted((_port(provider), provider, contract) for provider, contract in pairs)


class Servers:
    """One real server at a time: asking for another port stops the running one."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.port: int | None = None

    def ensure(self, port: int) -> None:
        if self.port == port:
            return
        self.stop()
        command = [sys.executable, "-m", "jobrouter", "local", "start", "--port", str(port)]
        chat_format = SERVERS[port]
        if chat_format is not None:
            command += ["--chat-format", chat_format]
        started = subprocess.run(
            command, cwd=self.logs, capture_output=True, text=True, timeout=300, check=False
        )
        assert started.returncode == 0, started.stdout + started.stderr
        self.port = port

    def stop(self) -> None:
        if self.port is None:
            return
        command = [sys.executable, "-m", "jobrouter", "local", "stop", "--port", str(self.port)]
        subprocess.run(command, cwd=self.logs, capture_output=True, timeout=120, check=True)
        self.port = None


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    manager = Servers(tmp_path_factory.mktemp("servers"))
    try:
        yield manager
    finally:
        manager.stop()


@pytest.mark.parametrize(
    ("port", "provider", "contract"), _recorded(), ids=[f"{p}-{c}" for _, p, c in _recorded()]
)
def test_live_verdicts_equal_the_recorded_ones(
    servers: Servers, tmp_path: Path, port: int, provider: str, contract: str
) -> None:
    servers.ensure(port)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JOBROUTER_")}
    command = [
        sys.executable, "-m", "jobrouter", "contracts", "run", "--config", str(CONFIG),
        "--database", f"sqlite:///{tmp_path / 'compare.db'}",
        "--compare-recorded", str(CASSETTES), "--provider", provider, "--contract", contract,
    ]  # fmt: skip
    compared = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**environment, "COLUMNS": "200"},
        timeout=1800,
        check=False,
    )
    assert compared.stdout.startswith(f"{provider} x {contract}: same"), (
        compared.stdout + compared.stderr
    )
    assert compared.returncode == 0, compared.stderr
