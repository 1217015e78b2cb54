"""`jobrouter submit` against a spent budget: refused with nothing written, its own exit code
(8, `Exit.OVER_BUDGET`), and a message that names the budget, its cap, its spend and what to do.
The real CLI in a subprocess, on every backend."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from jobrouter.exits import Exit
from jobrouter.store import open_store
from jobrouter.store.spend import Hold, Reservation, charge_in
from tests.acceptance.conftest import CONTRACT, cli
from tests.support.backends import db_url

__all__ = ["db_url"]  # the fixture, imported by name

CONFIG = """
[database]
url = "{url}"

[certification]
required = false

[providers.down]
model = "openai/down"
api_base = "http://127.0.0.1:9/v1"

[tasks.echo]
contract = "{contract}"
providers = ["down"]
side_effects = "none"

[budgets.cli_daily]
owner = "cli"
period = "day"
tokens = 1000
"""


def spend_it_all(url: str) -> None:
    async def go() -> None:
        store = await open_store(url)
        try:
            day = time.time() // 86_400 * 86_400  # the UTC day's start
            hold = Hold("cli_daily", day, None, 1000)
            async with store.connector.write() as tx:
                crossed = await charge_in(
                    store.connector.queries, tx, Reservation((hold,), 0, 1000)
                )
                assert crossed is None
        finally:
            await store.close()

    asyncio.run(go())


def test_a_submit_over_budget_exits_8_naming_the_budget(tmp_path: Path, db_url: str) -> None:
    """Mutant killed: `exit_code_of` without its BudgetExhausted line (exit 5, as any refusal)."""
    config = tmp_path / "jobrouter.toml"
    config.write_text(CONFIG.format(url=db_url, contract=CONTRACT))
    hello = '{"text": "hello"}'
    first = cli(config, "submit", "-t", "echo", "-k", "k1", "-i", hello, "--wait", "0")
    assert first.returncode == Exit.PENDING, first.stderr
    spend_it_all(db_url)
    refused = cli(config, "submit", "-t", "echo", "-k", "k2", "-i", hello, "--wait", "0")
    assert refused.returncode == Exit.OVER_BUDGET == 8, refused.stderr
    said = " ".join(refused.stderr.split())
    assert "budget cli_daily has nothing left this period: 1000 of its 1000 tokens" in said
    assert "submit again when the period ends (in " in said
    assert "raise [budgets.cli_daily] tokens" in said
    replay = cli(config, "submit", "-t", "echo", "-k", "k1", "-i", hello, "--wait", "0")
    assert replay.returncode == Exit.PENDING, replay.stderr  # a replay gets its job back
