"""Issue 30 item 1, the quick commands: `submit`, `show`, `jobs list`, `cancel`, `resolve`,
`token ...` and `config check` call no provider, so they import no litellm (nor FastAPI) and
start no leader, no workers, no outbox delivery, no periodic task and no warm-up. Each runs as
the real CLI in a subprocess under tests/support/cli_probe.py, which reports the modules it
imported and the asyncio tasks it started. Before, `submit` and `resolve` opened a whole
router: litellm's import (31 to 56 s under load) came first, and a `resolve failed` issued 24 s
before a job's deadline landed after it. The probe's positive control (a `jobrouter worker`,
which does all of that) is in tests/acceptance/e2e/test_cli_console.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from jobrouter.exits import Exit
from jobrouter.models import Attempt, Job
from jobrouter.states import AttemptState, JobState
from jobrouter.store import open_store
from tests.acceptance.conftest import CONTRACT, ROOT
from tests.support.backends import db_url
from tests.support.store_jobs import create_job, leave_unknown

__all__ = ["db_url"]  # the fixture, imported by name

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
DEADLINE_S = 30.0  # the post task's deadline; the resolve is issued at once after the job

CONFIG = """
[database]
url = "{url}"

[certification]
required = false

[providers.down]
model = "openai/down"
api_base = "http://127.0.0.1:9/v1"
retry = {{ attempts = 1 }}

[tasks.echo]
contract = "{contract}"
providers = ["down"]
side_effects = "none"
max_attempts = 1

[tasks.post]
contract = "{contract}"
providers = ["down"]
side_effects = "external"
deadline = {deadline}
"""


def write_config(folder: Path, url: str) -> Path:
    config = folder / "jobrouter.toml"
    config.write_text(CONFIG.format(url=url, contract=CONTRACT, deadline=DEADLINE_S))
    return config


def probed(
    folder: Path, config: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`jobrouter ARGS --config CONFIG` under the probe: the process and the probe's report."""
    report = folder / "probe.json"
    report.unlink(missing_ok=True)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JOBROUTER_")}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.cli_probe", str(report), *args, "-c", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,  # a guard only
        env={**environment, "COLUMNS": "200", **(env or {})},
    )
    return done, json.loads(report.read_text())


def unknown_attempt(url: str, task: str, key: str) -> tuple[Job, Attempt]:
    """A job whose only attempt timed out, waiting for a person (both `unknown`), written
    through the store."""

    async def go() -> tuple[Job, Attempt]:
        store = await open_store(url)
        try:
            job = await create_job(
                store,
                owner="cli",
                idempotency_key=key,
                task=task,
                input={"text": "hello"},
                params={},
                deadline_s=DEADLINE_S,
                claimed_by=None,
                claim_s=1.0,
            )
            return await leave_unknown(store, job.id, provider="down")
        finally:
            await store.close()

    return asyncio.run(go())


def read_back(url: str, attempt_id: str) -> tuple[Job, Attempt]:
    async def go() -> tuple[Job, Attempt]:
        store = await open_store(url)
        try:
            attempt = await store.jobs.get_attempt(attempt_id)
            assert attempt is not None
            job = await store.jobs.get_job(attempt.job_id)
            assert job is not None
            return job, attempt
        finally:
            await store.close()

    return asyncio.run(go())


def assert_quick(report: dict[str, Any], what: str) -> None:
    assert report["modules"] == [], f"{what} imported {report['modules']}"
    started = [t for t in report["tasks"] if t in RUNNING or t.startswith("periodic-")]
    assert started == [], f"{what} started {started}"


def test_quick_commands_import_no_litellm_and_start_nothing(tmp_path: Path, db_url: str) -> None:
    """Each quick command does its work (the exit code and the output say so) and the probe
    finds neither litellm nor a leader, worker, delivery or warm-up task. Mutants seen failing:
    `operating` opening the router with `run_workers=True` (submit, cancel and resolve import
    litellm and start `jobrouter-dispatch`, `jobrouter-leader`); the token commands importing
    `jobrouter.http.server` again (fastapi, uvicorn)."""
    config = write_config(tmp_path, db_url)
    _, attempt = unknown_attempt(db_url, "post", "k-unknown")
    hello = '{"text": "hello"}'
    submitted, report = probed(
        tmp_path, config, "submit", "-t", "echo", "-k", "k1", "-i", hello, "--wait", "0", "--json"
    )
    assert submitted.returncode == Exit.PENDING, submitted.stderr
    job = json.loads(submitted.stdout)
    assert job["state"] == "queued" and job["created"] is True
    assert_quick(report, "submit")
    commands: list[tuple[list[str], int, str]] = [
        (["submit", "-t", "echo", "-k", "k1", "-i", hello, "--wait", "0"], Exit.PENDING, "known"),
        (["submit", "-t", "echo", "-k", "k2", "-i", "{}"], Exit.REFUSED, "text"),
        (["show", job["id"]], 0, job["id"]),
        (["jobs", "list"], 0, job["id"]),
        (["cancel", job["id"]], 0, "cancelled"),
        (["resolve", attempt.id, "--outcome", "failed", "--note", "checked"], 0, attempt.id),
        (["token", "create", "shop"], 0, "shop"),
        (["token", "list"], 0, "shop"),
        (["config", "check"], 0, "post"),
    ]
    for args, code, says in commands:
        done, report = probed(tmp_path, config, *args)
        assert done.returncode == code, f"{args}: {done.stdout}{done.stderr}"
        assert says in done.stdout + done.stderr, f"{args}: {done.stdout}{done.stderr}"
        assert_quick(report, " ".join(args[:2]))
    resolved_job, resolved = read_back(db_url, attempt.id)
    assert resolved.state is AttemptState.FAILED and resolved.resolution_note == "checked"
    assert resolved_job.state is JobState.RUNNING  # reopened: a worker's policy decides next


def test_a_resolve_issued_before_the_deadline_lands_before_it(tmp_path: Path, db_url: str) -> None:
    """`resolve failed` on the unknown attempt of a job whose deadline is 30 s away lands
    before the deadline, even when importing litellm takes a minute (as under load: the probe
    makes it so). Mutant seen failing: `operating` with `run_workers=True` (the warm-up
    imports litellm before the resolution is written: it lands 60 s later, after the
    deadline)."""
    config = write_config(tmp_path, db_url)
    job, attempt = unknown_attempt(db_url, "post", "k-deadline")
    assert job.deadline_at is not None
    done, report = probed(
        tmp_path,
        config,
        "resolve",
        attempt.id,
        "--outcome",
        "failed",
        "--note",
        "nothing was posted",
        env={"CLI_PROBE_SLOW_IMPORT": "litellm:60"},
    )
    assert done.returncode == 0, done.stderr
    reopened, resolved = read_back(db_url, attempt.id)
    assert resolved.state is AttemptState.FAILED
    assert resolved.resolution_note == "nothing was posted"
    assert reopened.state is JobState.RUNNING  # reopened by the resolution
    assert reopened.updated_at < job.deadline_at, (reopened.updated_at, job.deadline_at)
    assert_quick(report, "resolve")
