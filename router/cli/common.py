"""What every command shares: the --config, --database and --json options, the configuration
they name, `run`, which runs one async step (each command calls `asyncio.run` once) and turns a
domain error into one red line and its exit code, and the two ways a quick command opens the
database: `reading` (the store alone) and `operating` (a router that runs nothing).

The quick commands (submit, show, find, jobs list, cancel, resolve, token, config check) call no
provider: they never import litellm and never start a leader, workers or periodic work, so each
answers in about a second even on a busy machine (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.text import Text

from jobrouter.config import CONFIG_ENV, RouterConfig, config_path, load_config
from jobrouter.errors import JobRouterError
from jobrouter.exits import exit_code_of
from jobrouter.printing import err

if TYPE_CHECKING:
    from jobrouter.api import Router
    from jobrouter.store import SqlStore

T = TypeVar("T")

log = logging.getLogger("jobrouter.cli")

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help=f"jobrouter.toml to use (default: ${CONFIG_ENV} or "
        "./jobrouter.toml; built-in defaults when absent)",
        show_default=False,
    ),
]
DatabaseOpt = Annotated[
    str | None,
    typer.Option(
        "--database",
        "-d",
        # Examples short enough for the narrowest help column at 80 columns, where a longer
        # word is cut to an ellipsis.
        help="database URL, overriding the config's \\[database] url: sqlite:///FILE or "
        "postgresql://HOST/DB",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON document (for scripts)")]


def settings(config: Path | None) -> RouterConfig:
    """The configuration: the file named by --config or $JOBROUTER_CONFIG (an error when it is
    missing: a typo must not mean defaults), else ./jobrouter.toml, else built-in defaults
    (said on stderr, with the database they point at)."""
    named = config is not None or bool(os.environ.get(CONFIG_ENV))
    path = config_path(config)
    try:
        if not named and not path.exists():
            defaults = RouterConfig()
            log.warning(
                "no --config, no $%s and no ./%s: built-in defaults (database %s)",
                CONFIG_ENV,
                path,
                defaults.database.url,
            )
            return defaults
        loaded = load_config(path)
    except JobRouterError as exc:
        fail(exc)
    # found by default: a printed command runs as printed from that folder without --config
    return loaded if named else loaded.model_copy(update={"config_file": None})


def fail(exc: JobRouterError) -> NoReturn:
    """One red line on stderr (the message printed as text: data may hold `[...]`), then the
    exit code of its kind (router/exits.py)."""
    err.print(Text.assemble(("error:", "red"), " ", str(exc)))
    raise typer.Exit(exit_code_of(exc)) from None


def run(step: Callable[[], Awaitable[T]]) -> T:
    """Run one async step; a domain error becomes one red line and its exit code."""
    try:
        return asyncio.run(step())  # type: ignore[arg-type]
    except JobRouterError as exc:
        fail(exc)


def parse_json(option: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(
            f"{option} must be JSON ({exc.msg} at column {exc.colno}): {text!r}"
        ) from None


@asynccontextmanager
async def reading(cfg: RouterConfig, database: str | None) -> AsyncIterator[SqlStore]:
    """The store alone, for commands that only read or keep tokens: no contract is loaded and
    no provider is built (`Router.open` does both)."""
    from jobrouter.store import open_store

    store = await open_store(database or cfg.database.url)
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def operating(cfg: RouterConfig, database: str | None) -> AsyncIterator[Router]:
    """A router for the commands that change jobs (submit, cancel, resolve): the door and the
    contracts are there, but nothing runs here. `run_workers=False` builds no engine, leader,
    outbox delivery or periodic task and warms up no provider, so litellm is never imported;
    a `jobrouter worker` or `serve` on the same database runs what these commands leave.
    `tasks_on_use`: only the contract of the task a command touches is loaded."""
    from jobrouter.api import Router  # the door and the store: only for the commands that write

    async with Router.open(database, cfg, run_workers=False, tasks_on_use=True) as router:
        yield router
