"""The CLI for people and scripts, run as the real `jobrouter` subprocess: `--version`,
`--log-level`, no silent defaults for a named config, a misspelled URL scheme, data printed as
text (never markup), `--json`, `jobs list`, `config check`, `--input @file`/`-` and the exit
codes of router/exits.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from jobrouter.exits import Exit, exit_code_of_state
from jobrouter.models import AttemptUsage
from jobrouter.states import AttemptState, JobState
from jobrouter.store import open_store
from tests.support.store_jobs import create_job

ROOT = Path(__file__).resolve().parents[3]
NASTY = "upstream said [/bold] and [red]no[/red] [providers.primary]"
SUMMARY = "provider primary answered with an error (HTTP 500) and may have acted"


def jobrouter(
    *args: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JOBROUTER_")}
    environment.update({"COLUMNS": "200", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "jobrouter", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )


def make_job_with_nasty_error(db: Path) -> tuple[str, str]:
    """A job whose failed attempt carries a provider's detail full of markup (as a provider may
    send) behind the router's summary."""

    async def go() -> tuple[str, str]:
        store = await open_store(f"sqlite:///{db}")
        try:
            job = await create_job(
                store,
                owner="shop",
                idempotency_key="k1",
                task="caption",
                input={"text": "[b]tea[/b]"},
                params={},
                deadline_s=None,
                claimed_by=None,
                claim_s=1.0,
            )
            _, attempt = await store.jobs.start_attempt(
                job.id, provider="primary", model=None, worker="w", lease_s=30, exclusive=False
            )
            await store.jobs.finish_attempt(
                attempt.id,
                AttemptState.FAILED,
                error_kind="rejected",
                error=SUMMARY,
                error_detail=NASTY,
                usage=AttemptUsage(),
            )
            return job.id, attempt.id
        finally:
            await store.close()

    return asyncio.run(go())


def test_version_and_exit_code_table() -> None:
    done = jobrouter("--version", cwd=ROOT)
    assert done.returncode == 0 and done.stdout.startswith("jobrouter ")
    assert {exit_code_of_state(state) for state in JobState} == {
        Exit.OK,
        Exit.FAILED,
        Exit.UNKNOWN,
        Exit.PENDING,
        Exit.CANCELLED,
    }


def test_show_prints_attempt_ids_and_markup_in_data_literally(tmp_path: Path) -> None:
    """Before: `[/bold]` in an attempt's error crashed `show` (rich MarkupError). The CLI reads
    the database, so it is an operator's: it prints the provider's detail too (issue 14)."""
    db = tmp_path / "jobs.db"
    job_id, attempt_id = make_job_with_nasty_error(db)
    done = jobrouter("show", job_id, "-d", f"sqlite:///{db}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert attempt_id in done.stdout
    assert "[/bold]" in done.stdout and "[providers.primary]" in done.stdout
    assert f"attempt 1 detail: {NASTY}" in done.stdout and SUMMARY in done.stdout
    as_json = jobrouter("show", job_id, "--events", "--json", "-d", f"sqlite:///{db}", cwd=tmp_path)
    document = json.loads(as_json.stdout)
    assert document["attempts"][0]["id"] == attempt_id
    assert document["attempts"][0]["error"] == SUMMARY
    assert document["attempts"][0]["error_detail"] == NASTY
    assert document["input"] == {"text": "[b]tea[/b]"}
    assert document["events"][0]["kind"] == "job.queued"


def test_jobs_list_filters_and_json(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    job_id, _ = make_job_with_nasty_error(db)
    url = f"sqlite:///{db}"
    listed = jobrouter("jobs", "list", "--json", "--counts", "-d", url, cwd=tmp_path)
    document = json.loads(listed.stdout)
    assert [item["id"] for item in document["items"]] == [job_id]
    assert document["counts"]["running"] == 1 and document["next_cursor"] is None
    other = json.loads(
        jobrouter("jobs", "list", "--json", "--owner", "nobody", "-d", url, cwd=tmp_path).stdout
    )
    assert other["items"] == []
    people = jobrouter("jobs", "list", "--provider", "primary", "-d", url, cwd=tmp_path)
    assert job_id in people.stdout, people.stderr
    bad = jobrouter("jobs", "list", "--cursor", "x", "-d", url, cwd=tmp_path)
    assert bad.returncode == Exit.ERROR and "cursor" in bad.stderr


def test_a_named_config_that_is_missing_is_an_error_not_defaults(tmp_path: Path) -> None:
    """Before: `--config typo.toml` (or $JOBROUTER_CONFIG) ran on built-in defaults and left
    a stray ./jobrouter.db."""
    given = jobrouter("jobs", "list", "--config", "typo.toml", cwd=tmp_path)
    env = jobrouter("jobs", "list", cwd=tmp_path, env={"JOBROUTER_CONFIG": "typo.toml"})
    for done in (given, env):
        assert done.returncode == Exit.ERROR
        assert "typo.toml" in done.stderr and "no such file" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_defaults_are_said_and_log_level_silences_them(tmp_path: Path) -> None:
    said = jobrouter("jobs", "list", cwd=tmp_path)
    quiet = jobrouter("--log-level", "error", "jobs", "list", cwd=tmp_path)
    quiet_env = jobrouter("jobs", "list", cwd=tmp_path, env={"JOBROUTER_LOG_LEVEL": "error"})
    wrong = jobrouter("--log-level", "loud", "jobs", "list", cwd=tmp_path)
    assert said.returncode == 0 and "built-in defaults" in said.stderr
    assert quiet.returncode == 0 and "built-in defaults" not in quiet.stderr
    assert quiet_env.returncode == 0 and "built-in defaults" not in quiet_env.stderr
    assert wrong.returncode == Exit.USAGE


def test_misspelled_url_scheme_is_named(tmp_path: Path) -> None:
    """Before: `sqllite:///x.db` was taken for a path and made a folder `sqllite:`."""
    done = jobrouter("jobs", "list", "-d", "sqllite:///x.db", cwd=tmp_path)
    assert done.returncode == Exit.ERROR
    assert "did you mean sqlite://" in done.stderr
    assert not (tmp_path / "sqllite:").exists()


def test_config_errors_print_section_names_literally(tmp_path: Path) -> None:
    """Before: rich ate `[providers.nope]` out of the message."""
    config = tmp_path / "jobrouter.toml"
    config.write_text(
        '[providers.primary]\nmodel = "openai/x"\n[tasks.caption]\nproviders = ["nope"]\n'
    )
    done = jobrouter("jobs", "list", "--config", str(config), cwd=tmp_path)
    assert done.returncode == Exit.ERROR and "[providers.nope]" in done.stderr


def test_config_check_suggests_and_lists_routes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[databse]\nurl = "sqlite:///x.db"\n[providers.primary]\n'
        'model = "openai/x"\n[tasks.caption]\nproviders = ["primry"]\n'
        "max_atempts = 2\n"
    )
    done = jobrouter("config", "check", str(bad), cwd=tmp_path)
    assert done.returncode == Exit.ERROR
    assert "did you mean 'database'?" in done.stderr
    assert "did you mean 'max_attempts'?" in done.stderr
    assert "did you mean 'primary'?" in done.stderr
    good = jobrouter(
        "config", "check", "--json", str(ROOT / "cassettes" / "jobrouter.toml"), cwd=tmp_path
    )
    report: dict[str, Any] = json.loads(good.stdout)
    assert good.returncode == 0 and report["valid"] is True
    routes = {r["task"]: [name for name, _ in r["providers"]] for r in report["routes"]}
    assert routes["title_hedged"] == ["primary", "backup"]


def start_worker(config: Path, report: Path, cwd: Path) -> subprocess.Popen[str]:
    """`jobrouter worker` under tests/support/cli_probe.py, once it says it runs jobs."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JOBROUTER_")}
    probe = [sys.executable, "-m", "tests.support.cli_probe", str(report)]
    with (cwd / "worker.log").open("w") as log:  # the child keeps its own descriptor
        worker = subprocess.Popen(
            [*probe, "worker", "--config", str(config)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**environment, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
        )
    assert worker.stdout is not None
    for line in worker.stdout:  # the test's timeout guards a worker that never says it
        if "Ctrl-C to stop" in line:
            return worker
    raise AssertionError(f"the worker ended: {(cwd / 'worker.log').read_text()}")


def stop_worker(worker: subprocess.Popen[str], report: Path) -> dict[str, Any]:
    worker.terminate()
    assert worker.wait(timeout=120) == 0
    if worker.stdout is not None:
        worker.stdout.close()
    document: dict[str, Any] = json.loads(report.read_text())
    return document


def test_submit_exit_codes_failed_and_refused_with_input_from_file_and_stdin(
    tmp_path: Path,
) -> None:
    """A provider that refuses connections: the job fails (3); the key again with another
    input is refused (5). Input from `@file`, then from stdin. `submit` runs no job itself: a
    `jobrouter worker` on the database runs it, and `submit --wait` waits for that. The
    worker is also the positive control of tests/acceptance/test_cli_quick.py: under the same
    probe it shows litellm imported and its engine's and leader's tasks running."""
    config = tmp_path / "jobrouter.toml"
    config.write_text(f"""
[database]
url = "sqlite:///{tmp_path / "jobs.db"}"
[certification]
required = false
[providers.down]
model = "openai/down"
api_base = "http://127.0.0.1:9/v1"
retry = {{ attempts = 1 }}
[tasks.echo]
providers = ["down"]
side_effects = "none"
max_attempts = 1
""")
    (tmp_path / "input.json").write_text('{"text": "hello"}')
    report = tmp_path / "worker.json"
    worker = start_worker(config, report, tmp_path)
    try:
        failed = jobrouter(
            "submit",
            "-t",
            "echo",
            "-k",
            "k1",
            "-i",
            "@input.json",
            "--json",
            "--wait",
            "300",  # a guard only: the worker fails the job at its first attempt
            "--config",
            str(config),
            cwd=tmp_path,
        )
    finally:
        probed = stop_worker(worker, report)
    assert failed.returncode == Exit.FAILED, failed.stderr
    assert json.loads(failed.stdout)["state"] == "failed"
    assert "litellm" in probed["modules"]
    assert {"jobrouter-dispatch", "jobrouter-leader"} <= set(probed["tasks"]), probed
    refused = jobrouter(
        "submit",
        "-t",
        "echo",
        "-k",
        "k1",
        "-i",
        "-",
        "--config",
        str(config),
        cwd=tmp_path,
        stdin='{"text": "other"}',
    )
    assert refused.returncode == Exit.REFUSED, refused.stderr
    assert "k1" in refused.stderr


def test_submit_without_a_worker_leaves_the_job_queued_and_says_so(tmp_path: Path) -> None:
    """No worker on the database: `submit --wait` ends with the job still queued (exit 6) and
    says what runs it, instead of running it itself. Mutant seen failing: the queued note in
    router/cli/jobs.py `_waited` removed."""
    db = tmp_path / "jobs.db"
    config = tmp_path / "jobrouter.toml"
    config.write_text(
        f'[database]\nurl = "sqlite:///{db}"\n[certification]\nrequired = false\n'
        '[providers.down]\nmodel = "openai/down"\napi_base = "http://127.0.0.1:9/v1"\n'
        '[tasks.echo]\nproviders = ["down"]\nside_effects = "none"\n'
    )
    args = ("submit", "-t", "echo", "-k", "k1", "-i", '{"text": "hi"}', "--wait", "0.5")
    done = jobrouter(*args, "--config", str(config), cwd=tmp_path)
    assert done.returncode == Exit.PENDING, done.stderr
    assert "still queued after 0.5s" in done.stdout
    assert "`jobrouter worker` or `jobrouter serve`" in done.stdout


def test_ids_are_printed_whole_in_an_80_column_terminal(tmp_path: Path) -> None:
    """`show` and `jobs list` exist to give the ids `resolve` and `show` need: at rich's
    default 80 columns (a pipe, a CI log) they were cut to `01a2318…`."""
    db = tmp_path / "jobs.db"
    job_id, attempt_id = make_job_with_nasty_error(db)
    narrow = {"COLUMNS": "80"}
    shown = jobrouter("show", job_id, "-d", f"sqlite:///{db}", cwd=tmp_path, env=narrow)
    listed = jobrouter("jobs", "list", "-d", f"sqlite:///{db}", cwd=tmp_path, env=narrow)
    assert shown.returncode == listed.returncode == 0, shown.stderr + listed.stderr
    assert attempt_id in shown.stdout
    assert job_id in listed.stdout
