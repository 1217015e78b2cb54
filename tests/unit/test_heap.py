"""`[engine] freeze_startup_heap`: the first router of a process that starts its workers
freezes the heap it started with (router/heap.py); with the key off nothing is frozen, and a
router without workers never freezes. Each case in a fresh interpreter: a freeze is for the
life of the process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import asyncio, gc, sys
from jobrouter import Router
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from tests.support.fakes import FakeProvider

async def main() -> None:
    config = RouterConfig(
        engine=EngineConfig(freeze_startup_heap=sys.argv[2] == "on"),
        tasks={"t": TaskConfig(providers=["p"], side_effects="none", certification="none")},
    )
    before = gc.get_freeze_count()
    workers = sys.argv[3] == "workers"
    providers = {"p": FakeProvider("p")}
    async with Router.open(sys.argv[1], config, providers=providers, run_workers=workers):
        print(before, gc.get_freeze_count())

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("key", "workers", "frozen"),
    [("on", "workers", True), ("off", "workers", False), ("on", "none", False)],
)
def test_the_start_up_heap_is_frozen_once_workers_start(
    tmp_path: Path, key: str, workers: str, frozen: bool
) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, url, key, workers],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    before, after = map(int, out.stdout.split())
    assert before == 0
    assert (after > 10_000) is frozen, out.stdout  # the imports alone are many thousands
