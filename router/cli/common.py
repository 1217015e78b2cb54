"""What every command shares: the --config, --database and --json options, the configuration
they name, and `run`, which runs one async step (each command calls `asyncio.run` once) and turns a
domain error into one red line and its exit code."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.text import Text

from jobrouter.config import CONFIG_ENV, RouterConfig, config_path, load_config
from jobrouter.errors import JobRouterError
from jobrouter.exits import exit_code_of
from jobrouter.printing import err

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
        help="database URL, overriding the config's "
        "\\[database] url, e.g. "
        "sqlite:///jobrouter.db or postgresql://postgres@127.0.0.1:5432/jobs",
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
