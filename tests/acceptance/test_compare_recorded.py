"""`jobrouter contracts run --compare-recorded DIR` and `contracts check`, the real CLI in a
subprocess against a real HTTP provider (the fault server, through litellm) and a real SQLite
file: a recording made with `--record`, then the same provider live, then the provider changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.conftest import ROOT
from tests.providers.fault_server import FaultServer, start_fault_server

CONTRACT = """\
name: titles
version: 1
side_effects: none
prompt:
  user: "Write a short shop title for: {{ product }}"
output_schema:
  type: object
  required: [title]
  properties: {title: {type: string}}
sampling: {temperature: 0, max_tokens: 40, repeats: 2, min_agreement: 1.0, agree_on: [title]}
cases:
  - name: mug
    input: {product: Blue ceramic mug}
    expect: [{type: contains, path: title, value: mug}]
  - name: tea
    input: {product: Saffron tea}
    expect: [{type: contains, path: title, value: tea}]
"""
CONFIG = """
[database]
url = "sqlite:///{db}"

[providers.fault]
model = "openai/fault-model"
api_base = "{api_base}"
context_window = 2048

[tasks.title]
contract = "{contract}"
providers = ["fault"]
"""
GOOD = '{"title": "Blue mug and saffron tea"}'  # passes both golden cases
OFF_TOPIC = '{"title": "A lovely gift"}'  # schema-valid, misses every expectation


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    with start_fault_server() as fault:
        yield fault


@pytest.fixture
def config(tmp_path: Path, server: FaultServer) -> Path:
    server.reset(content=GOOD)
    contract = tmp_path / "titles.yaml"
    contract.write_text(CONTRACT)
    path = tmp_path / "jobrouter.toml"
    path.write_text(
        CONFIG.format(db=tmp_path / "jobs.db", api_base=server.api_base, contract=contract)
    )
    return path


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


def test_live_equal_to_the_recording_is_same_and_a_changed_provider_differs(
    config: Path, server: FaultServer, tmp_path: Path
) -> None:
    """Mutants: the comparison keeps the live record (certify_pair: status turns to fail),
    exits 0 on a difference."""
    cassettes = tmp_path / "cassettes"
    recorded = cli(config, "contracts", "run", "--cassettes", str(cassettes), "--record")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert (cassettes / "fault" / "titles" / "certification.json").is_file()

    same = cli(config, "contracts", "run", "--compare-recorded", str(cassettes))
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.splitlines()[0] == "fault x titles: same"

    server.reset(content=OFF_TOPIC)
    report = tmp_path / "compare.json"
    differs = cli(
        config,
        "contracts",
        "run",
        "--compare-recorded",
        str(cassettes),
        "--json-report",
        str(report),
    )
    assert differs.returncode == 1, differs.stdout + differs.stderr
    lines = differs.stdout.splitlines()
    assert lines[0] == "fault x titles: differs (recorded pass 2/2, live fail 0/2)"
    assert "  case mug: recorded pass, live fail (behaviour: contains)" in lines
    assert "    live outputs: [{'title': 'A lovely gift'}, {'title': 'A lovely gift'}]" in lines
    (cell,) = json.loads(report.read_text())["comparisons"]
    assert cell["outcome"] == "differs"
    assert [case["same"] for case in cell["cases"]] == [False, False]

    status = json.loads(cli(config, "contracts", "status", "--json").stdout)
    assert [c["status"] for c in status["cells"]] == ["pass"]  # the comparison kept nothing


def test_a_pair_without_a_recording_is_not_a_pass(config: Path, tmp_path: Path) -> None:
    """Mutant: a missing recording skipped (exit 0 with nothing compared)."""
    missing = cli(config, "contracts", "run", "--compare-recorded", str(tmp_path / "none"))
    assert missing.returncode == 1
    assert missing.stdout.startswith("fault x titles: not recorded (no recorded certification at ")
    both = cli(config, "contracts", "run", "--compare-recorded", "x", "--cassettes", "x")
    assert both.returncode == 2
    assert "calls the providers live" in both.stderr


def test_run_and_check_warn_of_free_text_agreement(config: Path) -> None:
    """The contract agrees word for word on a free-text title: `contracts run` and `status`
    print the warning after the matrix (`status --json` under `warnings`), `contracts check`
    without calling anyone. Mutants: run prints no warnings; status computes none."""
    ran = cli(config, "contracts", "run")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    warning = (
        "warning: contract titles, sampling.agree_on: min_agreement 1.0 over 2 runs on free "
        "text [title]"
    )
    assert any(line.startswith(warning) for line in ran.stdout.splitlines()), ran.stdout
    status = cli(config, "contracts", "status")
    assert any(line.startswith(warning) for line in status.stdout.splitlines()), status.stdout
    as_json = json.loads(cli(config, "contracts", "status", "--json").stdout)
    assert [w["field"] for w in as_json["warnings"]] == ["sampling.agree_on"]
    checked = cli(config, "contracts", "check")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith(warning)
