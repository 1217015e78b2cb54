"""`jobrouter spend`, the real CLI in a subprocess on every backend, over real attempts (jobs
run by a router on fake providers that report their use, one priced, one not): the report as
a table and as JSON, an unknown cost shown as unknown and never as 0, one owner's report,
each budget's use below it, and a bad query refused with the usage exit code."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from jobrouter import Router
from jobrouter.exits import Exit
from jobrouter.states import JobState
from tests.acceptance.conftest import CONTRACT, cli
from tests.store.test_spend_report import COMPLETION, COST, PROMPT, Reporting
from tests.support.backends import db_url

__all__ = ["db_url"]  # the fixture, imported by name

CONFIG = """
[database]
url = "{url}"

[certification]
required = false

[providers.priced]
model = "openai/fake"
price = {{ input_usd_per_million = 1, output_usd_per_million = 1 }}

[providers.unpriced]
model = "openai/unpriced"

[tasks.caption]
contract = "{contract}"
providers = ["priced"]
side_effects = "none"

[tasks.reply]
contract = "{contract}"
providers = ["unpriced"]
side_effects = "none"

[budgets.shop1_daily]
owner = "shop-1"
period = "day"
tokens = 1000
"""
USED = PROMPT + COMPLETION


def run_jobs(config: Path) -> None:
    """shop-1: a caption (priced) and a reply (price unknown); shop-2: a caption."""

    async def go() -> None:
        providers = {"priced": Reporting("priced"), "unpriced": Reporting("unpriced", priced=False)}
        async with Router.open(config=config, providers=providers) as router:
            for owner, key, task in (
                ("shop-1", "c1", "caption"),
                ("shop-1", "r1", "reply"),
                ("shop-2", "c1", "caption"),
            ):
                job = await router.submit(owner, key, task, {"text": "tea"}, {"max_tokens": 40})
                done = await router.wait(job.id, timeout=60)
                assert done.state is JobState.SUCCEEDED, done

    asyncio.run(go())


def configured(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "jobrouter.toml"
    config.write_text(CONFIG.format(url=url, contract=CONTRACT))
    run_jobs(config)
    return config


def test_the_report_as_json_counts_an_unknown_cost_and_shows_the_budget(
    tmp_path: Path, db_url: str
) -> None:
    """Mutant killed: `print_json` given the report without `budgets` (the budget's use gone
    from the document)."""
    config = configured(tmp_path, db_url)
    done = cli(config, "spend", "--by", "owner", "--by", "task", "--json")
    assert done.returncode == Exit.OK, done.stderr
    document = json.loads(done.stdout)
    lines = {(x["owner"], x["task"]): x for x in document["lines"]}
    assert lines.keys() == {("shop-1", "caption"), ("shop-1", "reply"), ("shop-2", "caption")}
    assert lines["shop-1", "reply"]["cost_usd"] is None
    assert lines["shop-1", "reply"]["cost_unknown"] == 1
    assert lines["shop-1", "reply"]["tokens"] == USED
    assert abs(lines["shop-2", "caption"]["cost_usd"] - COST) < 1e-12
    assert document["total"]["attempts"] == 3
    assert abs(document["total"]["cost_usd"] - 2 * COST) < 1e-12
    [budget] = document["budgets"]
    assert (budget["budget"], budget["charged_tokens"]) == ("shop1_daily", 2 * USED)
    assert budget["remaining_tokens"] == 1000 - 2 * USED


def test_the_table_of_one_owner_says_unknown_and_lists_its_budget(
    tmp_path: Path, db_url: str
) -> None:
    """Mutant killed: `_cost` printing an unknown cost as `0.000000`."""
    config = configured(tmp_path, db_url)
    done = cli(config, "spend", "--by", "task,provider", "--owner", "shop-1")
    assert done.returncode == Exit.OK, done.stderr
    rows = {
        tuple(cell.strip() for cell in line.split("│")[1:-1]) for line in done.stdout.splitlines()
    }
    assert ("caption", "priced", "1", str(USED), f"{COST:.6f}", "0") in rows
    assert ("reply", "unpriced", "1", str(USED), "unknown", "1") in rows
    assert ("total", "", "2", str(2 * USED), f"{COST:.6f}", "1") in rows
    assert "shop-2" not in done.stdout
    assert any(row[:2] == ("shop1_daily", "owner shop-1") for row in rows), done.stdout


def test_a_bad_query_exits_with_the_usage_code_naming_it(tmp_path: Path, db_url: str) -> None:
    """Mutant killed: `exit_code_of` without its SpendQueryInvalid line (exit 1, an error)."""
    config = tmp_path / "jobrouter.toml"
    config.write_text(CONFIG.format(url=db_url, contract=CONTRACT))
    bad_group = cli(config, "spend", "--by", "owner,shop")
    assert bad_group.returncode == Exit.USAGE == 2, bad_group.stderr
    said = " ".join(bad_group.stderr.split())
    assert "by: no such group (got 'shop'); group by any of owner, task, provider" in said
    empty = cli(config, "spend", "--since", "2026-12-05", "--until", "2026-12-01")
    assert empty.returncode == Exit.USAGE, empty.stderr
    assert "until: the range is empty" in " ".join(empty.stderr.split())
