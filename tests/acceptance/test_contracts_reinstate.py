"""`jobrouter contracts reinstate` as an operator runs it (the real CLI in a subprocess, a real
SQLite file): it lifts a suspension by live answers only with a reason, only for a routed and
suspended pair, and keeps who and why; `contracts status --json` shows both states."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from jobrouter.store import open_store
from jobrouter.store.live_watch import Suspension, WatchRow
from tests.acceptance.conftest import CONTRACT, ROOT

CONFIG = """
[database]
url = "sqlite:///{db}"

[providers.down]
model = "openai/down"
api_base = "http://127.0.0.1:9/v1"

[tasks.echo]
contract = "{contract}"
providers = ["down"]
"""
SUSPENSION = Suspension(
    at=1.0,
    rule="failure rate",
    reason="live failure rate 30% over 40 answers against a certified baseline of 2%",
    answered=40,
    failed=12,
    sample_attempts=("att-9",),
)


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JOBROUTER_")}
    return subprocess.run(
        [sys.executable, "-m", "jobrouter", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**environment, "COLUMNS": "200"},
        timeout=300,
        check=False,
    )


async def suspend(db: Path) -> None:
    store = await open_store(f"sqlite:///{db}")
    try:
        await store.live_watch.save(WatchRow("down", "echo", answered=40, suspension=SUSPENSION))
    finally:
        await store.close()


async def watch_of(db: Path) -> WatchRow:
    store = await open_store(f"sqlite:///{db}")
    try:
        return (await store.live_watch.watches())[("down", "echo")]
    finally:
        await store.close()


def reinstate(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli(config, "contracts", "reinstate", "--provider", "down", "--contract", "echo", *extra)


def test_reinstate_lifts_a_suspension_on_the_record(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    config = tmp_path / "jobrouter.toml"
    config.write_text(CONFIG.format(db=db, contract=CONTRACT))

    refused = reinstate(config, "--reason", "checked")
    assert refused.returncode == 1, refused.stderr
    assert "down is not suspended for contract 'echo'" in refused.stderr

    asyncio.run(suspend(db))
    status = json.loads(cli(config, "contracts", "status", "--json").stdout)
    [cell] = status["cells"]
    assert cell["live"]["suspension"]["reason"] == SUSPENSION.reason
    assert cell["live"]["suspension"]["sample_attempts"] == ["att-9"]

    blank = reinstate(config, "--reason", "  ")
    assert blank.returncode == 1
    assert "reason: say what you checked" in blank.stderr
    elsewhere = cli(
        config, "contracts", "reinstate", "--provider", "up", "--contract", "echo", "--reason", "x"
    )
    assert elsewhere.returncode == 1
    assert "up x echo is not routed; the config routes: down x echo" in elsewhere.stderr

    done = reinstate(config, "--reason", "template fixed and checked by hand")
    assert done.returncode == 0, done.stderr
    assert "provider down reinstated for contract echo" in done.stdout
    watch = asyncio.run(watch_of(db))
    assert watch.suspension is None and watch.answered == 0
    assert watch.reinstated is not None
    assert watch.reinstated.reason == "template fixed and checked by hand"
    assert watch.reinstated.by.startswith("user:")
    status = json.loads(cli(config, "contracts", "status", "--json").stdout)
    assert status["cells"][0]["live"]["reinstated"]["by"] == watch.reinstated.by
