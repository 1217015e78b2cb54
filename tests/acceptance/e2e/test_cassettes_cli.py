"""`jobrouter cassettes check` as a user runs it: the repository's cassettes pass; a planted
secret and a changed contract each make it fail and say what to do."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def check(root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "jobrouter",
            "cassettes",
            "check",
            str(root),
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "COLUMNS": "200",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_OFFLINE_MODE": "true",
        },
    )


def test_the_recorded_cassettes_pass() -> None:
    done = check(ROOT / "cassettes", ROOT / "cassettes" / "jobrouter.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no secrets, none stale" in done.stdout


def test_a_planted_secret_and_a_stale_contract_fail(tmp_path: Path) -> None:
    root = tmp_path / "cassettes"
    shutil.copytree(ROOT / "cassettes", root)
    cassette = root / "primary" / "product_title" / "certify.yaml"
    planted = "\n# Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123\n"
    cassette.write_text(cassette.read_text() + planted)
    # A local copy of the contract with one case changed: its fingerprint no longer matches.
    contract = (ROOT / "contracts" / "library" / "caption.yaml").read_text()
    (root / "caption.yaml").write_text(contract.replace("value: tea", "value: saffron"))
    config = (
        (root / "jobrouter.toml")
        .read_text()
        .replace('contract = "caption"', 'contract = "caption.yaml"')
    )
    (root / "jobrouter.toml").write_text(config)
    done = check(root, root / "jobrouter.toml")
    assert done.returncode == 1
    assert "secret" in done.stderr and "primary/product_title" in done.stderr
    assert "stale" in done.stderr and "caption" in done.stderr
    assert "abcdefghijklmnop" not in done.stderr  # never echo the secret itself
    assert "--record" in done.stderr
