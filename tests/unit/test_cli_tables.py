"""The CLI's tables at 80 columns (issue 30): rich squeezed every column of a wide table, so
states and providers read `succ…` and `prov…`. Now no cell is cut to an ellipsis, ids, states,
providers and event names are printed whole, no line is wider than the terminal, and a column
that cannot fit is left out and named. Run in-process through typer's runner, on a real SQLite
file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from jobrouter.cli import app
from jobrouter.models import AttemptUsage, Job
from jobrouter.states import AttemptState, EndReason, JobState
from jobrouter.store import SqlStore, open_store
from tests.support.outbox_jobs import new_job

WIDTH = 80
PROVIDERS = ("openai_primary", "anthropic_backup")


async def fill(store: SqlStore) -> list[Job]:
    """Jobs in every state but running, each attempt on a provider with a long name; one of
    them with its event buried (a dead letter)."""
    jobs = []
    for n, state in enumerate([JobState.SUCCEEDED, JobState.FAILED, JobState.UNKNOWN]):
        job = await new_job(store, owner="customer-support", key=f"order-{n}-caption")
        failed = await store.jobs.start_attempt(
            job.id, provider=PROVIDERS[0], model=None, worker="w1", lease_s=30, exclusive=False
        )
        await store.jobs.finish_attempt(
            failed[1].id,
            AttemptState.FAILED,
            error_kind=EndReason.NOT_SENT,
            error="HTTP 429: slow down",
            usage=AttemptUsage(),
        )
        _, second = await store.jobs.start_attempt(
            job.id, provider=PROVIDERS[1], model=None, worker="w1", lease_s=30, exclusive=False
        )
        if state is JobState.SUCCEEDED:
            await store.jobs.finish_attempt_cas(second.id, {"text": "done"}, AttemptUsage())
        else:
            ended = AttemptState.FAILED if state is JobState.FAILED else AttemptState.UNKNOWN
            await store.jobs.finish_attempt(
                second.id,
                ended,
                error_kind=EndReason.UNKNOWN,
                error="no answer",
                usage=AttemptUsage(),
            )
            await store.jobs.settle_job(job.id, state, error="every provider failed")
        jobs.append(job)
    jobs.append(await new_job(store, owner="customer-support", key="order-3-caption"))
    [event] = await store.outbox.claim_outbox(["customer-support"], "w1", claim_s=30, limit=1)
    await store.outbox.outbox_bury(event.id, "w1", error="HTTP 500: receiver down")
    return jobs


@pytest.fixture
def config(tmp_path: Path) -> Path:
    file = tmp_path / "jobrouter.toml"
    file.write_text(f"""
[database]
url = "sqlite:///{tmp_path / "jobs.db"}"

[providers.{PROVIDERS[0]}]
model = "openai/gpt-4o-mini"

[providers.{PROVIDERS[1]}]
model = "anthropic/claude-3-5-haiku"

[tasks.caption]
contract = "caption"
providers = ["{PROVIDERS[0]}", "{PROVIDERS[1]}"]

[tasks.title]
contract = "product_title"
providers = ["{PROVIDERS[0]}"]

[tasks.extract]
contract = "extract_product"
providers = ["{PROVIDERS[0]}", "{PROVIDERS[1]}"]

[tasks.sentiment]
contract = "review_sentiment"
providers = ["{PROVIDERS[1]}"]

[webhooks.customer-support]
url = "https://hooks.customer-support.example/jobrouter/events"
secret_env = "CUSTOMER_SUPPORT_SECRET"
""")
    return file


@pytest.fixture
def jobs(tmp_path: Path, config: Path) -> list[Job]:
    async def go() -> list[Job]:
        store = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
        try:
            return await fill(store)
        finally:
            await store.close()

    return asyncio.run(go())


def at_80(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "…" not in out, out  # rich's ellipsis: a cell cut short
    wide = [line for line in out.splitlines() if cell_len(line) > WIDTH]
    assert not wide, "\n".join(wide)
    return out


def test_jobs_list_shows_whole_ids_and_states(config: Path, jobs: list[Job]) -> None:
    """mutant: `fitted_table` leaving no column out (`droppable = []`), seen failing (ids and
    states cut to an ellipsis)."""
    out = at_80("jobs", "list", "--config", str(config))
    for job in jobs:
        assert job.id in out
    for state in ("succeeded", "failed", "unknown", "queued"):
        assert f" {state} " in out
    assert "(left out at 80 columns: " in out  # and it says which


def test_show_prints_whole_providers_attempt_states_and_event_kinds(
    config: Path, jobs: list[Job]
) -> None:
    """mutant: `Col("provider", whole=True)` made a wrapping column, seen failing
    (`openai_prim` / `ary`); mutant: `droppable = []`, seen failing."""
    out = at_80("show", jobs[0].id, "--events", "--config", str(config))
    for name in (*PROVIDERS, "succeeded", "failed", "attempt.succeeded"):
        assert f" {name} " in out, name
    assert "(winner)" in out


def test_outbox_tables_fold_the_url_and_keep_the_event_id(config: Path, jobs: list[Job]) -> None:
    """mutant: the outbox tables built as before (rich's squeezing), seen failing (`https://…`)."""
    out = at_80("outbox", "--config", str(config))
    assert "customer-support" in out
    flat = "".join(line.strip("│ ") for line in out.splitlines())
    assert "https://hooks.customer-support.example/jobrouter/events" in flat.replace("│", "")
    assert "HTTP 500" in out


def test_contracts_status_fits_the_terminal(config: Path, jobs: list[Job]) -> None:
    """Four contracts do not fit across 80 columns with their names whole: the matrix goes on
    in a second table.

    mutant: `matrix_width` returning 110 always, seen failing (lines of 110 columns); mutant:
    `_across` never starting a new group, seen failing (`product_titl` / `e`)."""
    out = at_80("contracts", "status", "--config", str(config))
    for name in (*PROVIDERS, "caption", "product_title", "extract_product", "missing"):
        assert name in out


def test_a_demo_scene_title_too_long_for_its_rule_is_printed_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """mutant: `_scene` always titling the rule (rich cuts the title to `…`), seen failing."""
    import io

    from rich.console import Console

    import jobrouter.demo

    screen = Console(width=WIDTH, file=io.StringIO(), color_system=None)
    monkeypatch.setattr(jobrouter.demo, "console", screen)
    title = "The primary goes silent (injected): after the attempt timeout its attempt is UNKNOWN"
    jobrouter.demo._scene(5, title)
    jobrouter.demo._scene(8, "Jobs and their attempts")
    out = screen.file.getvalue()  # type: ignore[attr-defined]
    assert "…" not in out and f"5. {title}" in " ".join(out.split())
    assert "8. Jobs and their attempts" in out


def test_every_certification_status_has_a_colour_in_the_matrix() -> None:
    """A status the matrix cannot colour is a KeyError in `contracts status` (it was, for
    `suspended`, until tests/store/test_live_watch.py printed one)."""
    from jobrouter.contracts import Validity
    from jobrouter.printing import _STYLE

    assert set(_STYLE) == {validity.value for validity in Validity}
