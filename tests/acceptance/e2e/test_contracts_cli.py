"""`jobrouter contracts run | status` as a subprocess, against fault servers acting as providers.

Providers A and B answer a title that passes every golden case; C answers schema-valid JSON that
misses them. Contract `titles` (2 cases) is routed to A, C, B; contract `headline` (3 cases) to
B, A. Output goes to pipes, so the progress bar runs in its non-terminal mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.providers.fault_server import FaultServer, start_fault_server

ROOT = Path(__file__).resolve().parents[3]
GOOD = '{"title": "Blue mug and saffron tea"}'
OFF_TOPIC = '{"title": "A lovely gift"}'
TITLES = """\
name: titles
version: 1
side_effects: none
prompt: {user: "Write a short shop title for: {{ product }}"}
output_schema: {type: object, required: [title], properties: {title: {type: string}}}
sampling: {temperature: 0, max_tokens: 40, repeats: 2}
cases:
  - {name: mug, input: {product: Blue mug}, expect: [{type: contains, path: title, value: mug}]}
  - {name: tea, input: {product: Saffron tea}, expect: [{type: contains, path: title, value: tea}]}
"""
HEADLINE = """\
name: headline
version: 1
side_effects: none
prompt: {user: "A headline for {{ product }}, as JSON with a title"}
output_schema: {type: object, required: [title], properties: {title: {type: string}}}
sampling: {temperature: 0, max_tokens: 40, repeats: 1}
cases:
  - {name: colour, input: {product: Blue mug}, expect: [{type: contains, path: title, value: blue}]}
  - {name: drink, input: {product: Tea}, expect: [{type: contains, path: title, value: saffron}]}
  - {name: kitchen, input: {product: Mug}, expect: [{type: contains, path: title, value: mug}]}
"""
CONFIG = """\
[database]
url = "sqlite:///{db}"

[providers.A]
model = "openai/fault-model"
api_base = "{A}"
context_window = 2048  # unknown to litellm: else the fit is unverified

[providers.B]
model = "openai/fault-model"
api_base = "{B}"
context_window = 2048  # unknown to litellm: else the fit is unverified

[providers.C]
model = "openai/fault-model"
api_base = "{C}"
context_window = 2048  # unknown to litellm: else the fit is unverified

[tasks.title]
contract = "titles.yaml"  # relative to this file, not to the working directory
providers = ["A", "C", "B"]

[tasks.headline]
contract = "headline.yaml"
providers = ["B", "A"]
"""
TITLE_RUNS = 2 * 2  # cases x repeats of `titles`
HEADLINE_RUNS = 3 * 1


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, FaultServer]]:
    with ExitStack() as stack:
        yield {name: stack.enter_context(start_fault_server()) for name in "ACB"}


@pytest.fixture
def project(tmp_path: Path, servers: dict[str, FaultServer]) -> Path:
    """A folder with both contracts and a jobrouter.toml; the servers reset, C off-topic."""
    for name, server in servers.items():
        server.reset(content=OFF_TOPIC if name == "C" else GOOD)
    (tmp_path / "titles.yaml").write_text(TITLES)
    (tmp_path / "headline.yaml").write_text(HEADLINE)
    bases = {name: server.api_base for name, server in servers.items()}
    (tmp_path / "jobrouter.toml").write_text(CONFIG.format(db=tmp_path / "jobs.db", **bases))
    return tmp_path


def jobrouter(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m router contracts ARGS --config <project>/jobrouter.toml`, output captured."""
    command = [
        sys.executable,
        "-m",
        "jobrouter",
        "contracts",
        *args,
        "--config",
        str(project / "jobrouter.toml"),
    ]
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in done.stderr, done.stderr
    assert "\x1b[" not in done.stderr  # no progress bar drawn into a pipe
    return done


def requests(servers: dict[str, FaultServer]) -> dict[str, int]:
    return {name: int(server.stats()["total"]) for name, server in servers.items()}


def cells(matrix: str) -> dict[tuple[str, str], str]:
    """The rendered matrix read back: (provider, contract) -> the cell's lines joined by spaces."""
    lines = matrix.splitlines()
    header = next(line for line in lines if line.startswith("┃"))
    contracts = [name.strip() for name in header.strip("┃").split("┃")][1:]
    out: dict[tuple[str, str], str] = {}
    provider = ""
    for line in lines:
        if not line.startswith("│"):
            continue
        first, *texts = (text.strip() for text in line.strip("│").split("│"))
        provider = first or provider
        for contract, text in zip(contracts, texts, strict=True):
            if text:
                key = (provider, contract)
                out[key] = f"{out[key]} {text}" if key in out else text
    return out


def test_run_reports_the_failing_pair_then_status_shows_it_without_calls(
    project: Path, servers: dict[str, FaultServer]
) -> None:
    before = requests(servers)
    done = jobrouter(
        project,
        "run",
        "--json-report",
        str(project / "report.json"),
        "--junit",
        str(project / "junit.xml"),
    )
    assert done.returncode == 1, done.stderr
    assert requests(servers) == {
        "A": before["A"] + TITLE_RUNS + HEADLINE_RUNS,
        "C": before["C"] + TITLE_RUNS,
        "B": before["B"] + TITLE_RUNS + HEADLINE_RUNS,
    }
    matrix = cells(done.stdout)
    assert set(matrix) == {
        ("A", "titles"),
        ("C", "titles"),
        ("B", "titles"),
        ("A", "headline"),
        ("B", "headline"),
    }
    assert {matrix[p, c] for p in "AB" for c in ("titles", "headline")} == {"pass"}
    assert matrix["C", "titles"].startswith(
        "fail: behaviour: contains 0/2 cases; mug: behaviour: contains: run 1/2: case expectation"
    )
    _check_reports(project)
    after_run = requests(servers)
    status = jobrouter(project, "status")
    assert status.returncode == 0, status.stderr
    assert status.stdout == done.stdout
    as_json = jobrouter(project, "status", "--json")
    stored = json.loads(as_json.stdout)
    assert stored == json.loads((project / "report.json").read_text())  # the full evidence
    assert requests(servers) == after_run


def _check_reports(project: Path) -> None:
    report = json.loads((project / "report.json").read_text())
    assert report["passed"] is False
    statuses = {(c["provider"], c["contract"]): c["status"] for c in report["cells"]}
    assert statuses == {
        ("A", "titles"): "pass",
        ("C", "titles"): "fail",
        ("B", "titles"): "pass",
        ("B", "headline"): "pass",
        ("A", "headline"): "pass",
    }
    failed = next(c for c in report["cells"] if c["status"] == "fail")
    assert [case["passed"] for case in failed["certification"]["cases"]] == [False, False]
    assert failed["failed_checks"] == ["behaviour: contains"]
    first = failed["certification"]["cases"][0]
    assert first["failures"][0]["check"] == "behaviour: contains"  # the check as data
    assert first["rendering"]["reported_prompt_tokens"]  # the provider's own counts
    # what was sent and what the count implies, as separate fields (no system text here)
    assert {k: first["rendering"][k] for k in ("system_sent", "system_seen")} == {
        "system_sent": False,
        "system_seen": False,
    }
    assert first["rendering"]["markers_tokenization"] == "configured, not measured"
    suite = ET.parse(project / "junit.xml").getroot()
    cases = {(case.get("classname"), case.get("name")): case for case in suite.iter("testcase")}
    expected = {(f"{p}.titles", c) for p in "ACB" for c in ("mug", "tea")}
    expected |= {(f"{p}.headline", c) for p in "BA" for c in ("colour", "drink", "kitchen")}
    assert set(cases) == expected
    assert suite.get("tests") == str(len(expected)) and suite.get("failures") == "2"
    failing = {key for key, case in cases.items() if case.find("failure") is not None}
    assert failing == {("C.titles", "mug"), ("C.titles", "tea")}
    message = cases["C.titles", "tea"].findall("failure")[0].get("message") or ""
    assert message.startswith(
        "failed checks: behaviour: contains; behaviour: contains: run "
        '1/2: case expectation at title: found "A lovely gift", '
        'expected to contain "tea"'
    )
    evidence = cases["C.titles", "tea"].findall("failure")[0].text or ""
    assert "rendering pass: product counted" in evidence  # both counts, in the report
    assert "stability: 1 distinct answers, 0 of 2 runs differ from the most common" in evidence


def test_run_exits_zero_when_every_pair_passes_and_status_sees_staleness(
    project: Path, servers: dict[str, FaultServer]
) -> None:
    servers["C"].control(content=GOOD)
    done = jobrouter(project, "run", "--junit", str(project / "junit.xml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(cells(done.stdout).values()) == {"pass"}
    suite = ET.parse(project / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("12", "0")
    (project / "titles.yaml").write_text(TITLES.replace("value: tea", "value: saffron"))
    before = requests(servers)
    status = jobrouter(project, "status")
    assert status.returncode == 0, status.stderr
    assert requests(servers) == before
    matrix = cells(status.stdout)
    assert {key: text for key, text in matrix.items() if text != "pass"} == {
        (name, "titles"): "stale stale: contract changed" for name in "ACB"
    }
    assert len(matrix) == 5
