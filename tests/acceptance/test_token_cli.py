"""`jobrouter token create --expires | list | revoke`, the real CLI as subprocesses (issue 14:
before it only `token create` existed, so each of these fails on that code)."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from tests.acceptance.conftest import ROOT
from tests.acceptance.e2e.test_cli_serve import CLI


def _run(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "token", *args, "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_tokens_are_listed_revoked_and_expire(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    config = tmp_path / "jobrouter.toml"
    config.write_text(f'[database]\nurl = "sqlite:///{db}"\n')
    lasting = _run(config, "create", "shop-1")
    expiring = _run(config, "create", "shop-2", "--operator", "--expires", "30d")
    assert lasting.returncode == 0 and expiring.returncode == 0, expiring.stderr
    assert "expires 20" in expiring.stderr
    with sqlite3.connect(db) as conn:
        ids = dict(conn.execute("SELECT owner, id FROM api_tokens").fetchall())
    listed = _run(config, "list")
    assert listed.returncode == 0
    assert lasting.stdout.strip() not in listed.stdout  # a token is never shown again
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert lines[ids["shop-1"]].split()[-1] == "live"
    assert "live until 20" in lines[ids["shop-2"]] and " yes " in lines[ids["shop-2"]]
    revoked = _run(config, "revoke", ids["shop-1"])
    assert revoked.returncode == 0
    relisted = _run(config, "list").stdout
    assert f"{ids['shop-1']}" in relisted and "revoked 20" in relisted
    again = _run(config, "revoke", ids["shop-1"])
    assert again.returncode == 1 and "no unrevoked token" in again.stderr
    bad = _run(config, "create", "shop-3", "--expires", "soon")
    assert bad.returncode == 2 and "positive duration" in bad.stderr
