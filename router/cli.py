"""`jobrouter`: the command line. Each command runs `asyncio.run` once; nothing heavy (litellm)
is imported until a command needs a provider, so `jobrouter --help` answers at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from router.config import CONFIG_ENV, RouterConfig, config_path, load_config
from router.errors import JobRouterError

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
    """The configuration: the file given or found; defaults when none was asked for or found."""
    path = config_path(config)
    if config is None and not path.exists():
        return RouterConfig()
    return load_config(path)


def run(step: Callable[[], Awaitable[T]]) -> T:
    """Run one async step; a domain error becomes one red line and exit code 2."""
    try:
        return asyncio.run(step())  # type: ignore[arg-type]
    except JobRouterError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


def parse_json(option: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"{option} must be JSON ({exc.msg} at column {exc.colno}): "
                                 f"{text!r}") from None


def main() -> None:
    from router import cli_jobs  # noqa: F401  (registers the job commands)

    command_modules = ("router.cli_contracts", "router.cli_worker", "router.cli_local",
                       "router.demo", "router.http.cli", "router.cli_outbox",
                       "router.cli_cassettes")
    for name in command_modules:
        try:
            __import__(name)
        except ModuleNotFoundError as exc:  # a command group not installed in this build
            if exc.name is None or not name.startswith(exc.name):
                raise
    app()
