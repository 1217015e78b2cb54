"""The real `jobrouter` CLI in this process, watched: what it imported and which asyncio tasks
it started, written as JSON to REPORT when it ends (however it ends).

    python -m tests.support.cli_probe REPORT jobrouter-arguments...

The report is {"exit": code, "modules": [...], "tasks": [...]}: `modules` lists which of
`WATCHED` were imported, `tasks` the name of every task the command's event loops created.
A leader, the engine's workers, the outbox delivery, a periodic task and the providers'
warm-up each run as a named task (`jobrouter-leader`, `jobrouter-dispatch`, `jobrouter-poll`,
`jobrouter-outbox`, `periodic-*`, `jobrouter-warm-up`), so a command that starts none of them
shows none of those names. Nothing is replaced: the loop's task factory records and creates.

With `CLI_PROBE_SLOW_IMPORT=litellm:60` in the environment, importing litellm first takes 60 s
more: litellm's import as it was measured on a loaded machine (31 to 56 s), so a test can show
what a command that imports it would cost, without depending on the machine's load.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import json
import os
import sys
import time
from collections.abc import Coroutine, Generator
from contextvars import Context
from pathlib import Path
from typing import Any

WATCHED = ("litellm", "tiktoken", "tokenizers", "fastapi", "uvicorn")
_created: list[asyncio.Task[Any]] = []


def _factory(
    loop: asyncio.AbstractEventLoop,
    coro: Generator[Any, None, Any] | Coroutine[Any, Any, Any],
    context: Context | None = None,
) -> asyncio.Task[Any]:
    task = asyncio.Task(coro, loop=loop, context=context)
    _created.append(task)  # named after this returns (create_task sets the name): read at exit
    return task


class _Policy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        loop.set_task_factory(_factory)  # type: ignore[arg-type]
        return loop


class _SlowImport(importlib.abc.MetaPathFinder):
    """Delays the first import of one top-level module, then finds nothing itself."""

    def __init__(self, name: str, seconds: float) -> None:
        self.name, self.seconds = name, seconds

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname == self.name:
            sys.meta_path.remove(self)
            time.sleep(self.seconds)  # the cost being simulated, not a wait for anything
        return None


def main() -> None:
    report, args = Path(sys.argv[1]), sys.argv[2:]
    asyncio.set_event_loop_policy(_Policy())
    slow = os.environ.get("CLI_PROBE_SLOW_IMPORT")
    if slow:
        name, _, seconds = slow.partition(":")
        sys.meta_path.insert(0, _SlowImport(name, float(seconds)))
    code: int | str | None = 0
    try:
        from jobrouter.cli import app

        app(args, prog_name="jobrouter")
    except SystemExit as exc:
        code = exc.code
        raise
    finally:
        report.write_text(
            json.dumps(
                {
                    "exit": code,
                    "modules": [name for name in WATCHED if name in sys.modules],
                    "tasks": sorted({task.get_name() for task in _created}),
                }
            )
        )


if __name__ == "__main__":
    main()
