"""`jobrouter`: the command line. Each command runs `asyncio.run` once; nothing heavy (litellm)
is imported until a command needs a provider, so `jobrouter --help` answers at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from router.config import CONFIG_ENV, RouterConfig, config_path, load_config
from router.errors import JobRouterError
from router.exits import LOG_LEVEL_ENV, exit_code_of

T = TypeVar("T")

app = typer.Typer(
    name="jobrouter",
    help=(
        "Durable AI jobs on several LLM providers: one job per idempotency key, exactly one "
        "winning result, failover only to providers certified for the task's contract.\n\n"
        "Start with `jobrouter demo` (offline, from recorded cassettes)."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
err = Console(stderr=True)
log = logging.getLogger("jobrouter.cli")

ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help=f"jobrouter.toml to use (default: ${CONFIG_ENV} or "
                 "./jobrouter.toml; built-in defaults when absent)", show_default=False),
]
DatabaseOpt = Annotated[
    str | None,
    typer.Option("--database", "-d", help="database URL, overriding the config's "
                 "\\[database] url, e.g. "
                 "sqlite:///jobrouter.db or postgresql://postgres@127.0.0.1:5432/jobs"),
]


def settings(config: Path | None) -> RouterConfig:
    """The configuration: the file named by --config or $JOBROUTER_CONFIG (an error when it is
    missing: a typo must not mean defaults), else ./jobrouter.toml, else built-in defaults
    (said on stderr, with the database they point at)."""
    named = config is not None or bool(os.environ.get(CONFIG_ENV))
    path = config_path(config)
    try:
        if not named and not path.exists():
            defaults = RouterConfig()
            log.warning("no --config, no $%s and no ./%s: built-in defaults (database %s)",
                        CONFIG_ENV, path, defaults.database.url)
            return defaults
        return load_config(path)
    except JobRouterError as exc:
        fail(exc)


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
        raise typer.BadParameter(f"{option} must be JSON ({exc.msg} at column {exc.colno}): "
                                 f"{text!r}") from None


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"jobrouter {version('jobrouter')}")
        raise typer.Exit()


@app.callback()
def _options(
    log_level: Annotated[str | None, typer.Option(
        "--log-level", envvar=LOG_LEVEL_ENV, show_default=False,
        help="debug | info | warning | error: what the router logs on stderr (default: "
        "warning; info for serve and worker)")] = None,
    version: Annotated[bool | None, typer.Option(
        "--version", callback=_version, is_eager=True, help="print the version and exit")] = None,
) -> None:  # fmt: skip
    if log_level is None:
        return  # each command keeps its own default
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise typer.BadParameter(f"{log_level!r}: use debug, info, warning or error",
                                 param_hint="--log-level")
    # A later basicConfig of a command (serve, worker) then changes nothing: this level holds.
    logging.basicConfig(level=level, stream=sys.stderr, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main() -> None:
    from router import cli_jobs  # noqa: F401  (registers the job commands)

    command_modules = ("router.cli_listing", "router.cli_config", "router.cli_contracts",
                       "router.cli_worker", "router.cli_local", "router.demo", "router.http.cli",
                       "router.cli_outbox", "router.cli_cassettes")
    for name in command_modules:
        try:
            __import__(name)
        except ModuleNotFoundError as exc:  # a command group not installed in this build
            if exc.name is None or not name.startswith(exc.name):
                raise
    app()
