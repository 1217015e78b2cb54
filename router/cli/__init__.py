"""`jobrouter`: the command line. Each command module defines its commands and imports nothing
from this package but `jobrouter.cli.common`; the application is put together here, explicitly,
in the order `jobrouter --help` lists it. Each command runs `asyncio.run` once; nothing heavy
(litellm, FastAPI) is imported until a command needs it, so `jobrouter --help` answers at once.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer
from typer._click.core import Context, Parameter  # typer 0.29 carries its own click
from typer.core import TyperCommand, TyperGroup, TyperOption

from jobrouter.cli import (
    cassettes,
    config,
    contracts,
    demo,
    http,
    jobs,
    listing,
    local,
    outbox,
    worker,
)
from jobrouter.exits import LOG_LEVEL_ENV

__all__ = ["app", "main"]

HELP = (
    "Durable AI jobs on several LLM providers: one job per idempotency key, exactly one "
    "winning result, failover only to providers certified for the task's contract.\n\n"
    "Start with `jobrouter demo` (offline, from recorded cassettes)."
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"jobrouter {version('jobrouter')}")
        raise typer.Exit()


def _options(
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            envvar=LOG_LEVEL_ENV,
            show_default=False,
            help="debug | info | warning | error: what the router logs on stderr (default: "
            "warning; info for serve and worker)",
        ),
    ] = None,
    version: Annotated[
        bool | None,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="print the version and exit"
        ),
    ] = None,
) -> None:
    if log_level is None:
        return  # each command keeps its own default
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise typer.BadParameter(
            f"{log_level!r}: use debug, info, warning or error", param_hint="--log-level"
        )
    # A later basicConfig of a command (serve, worker) then changes nothing: this level holds.
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        force=True,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _untyped_flags(params: list[Parameter]) -> list[Parameter]:
    """typer prints a type beside every option, `<bool>` beside a flag (`--json`, `--help`): a
    flag takes no value, so its help shows none."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    def get_params(self, ctx: Context) -> list[Parameter]:
        return _untyped_flags(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: Context) -> list[Parameter]:
        return _untyped_flags(super().get_params(ctx))


def build_app() -> typer.Typer:
    """Every command and command group of `jobrouter`, registered by name."""
    cli = typer.Typer(
        name="jobrouter",
        help=HELP,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        cls=_Group,
    )
    cli.callback()(_options)
    for command in (
        jobs.submit,
        jobs.show,
        jobs.find,
        jobs.cancel,
        jobs.resolve,
        worker.worker,
        demo.demo,
        http.serve,
    ):
        cli.command(cls=_Command)(command)
    cli.command(name="purge", cls=_Command)(outbox.purge_command)
    groups = {
        "jobs": listing.jobs_app,
        "config": config.config_app,
        "contracts": contracts.contracts_app,
        "local": local.local_app,
        "token": http.token_app,
        "outbox": outbox.outbox_app,
        "cassettes": cassettes.cassettes_app,
    }
    for name, group in groups.items():
        for info in group.registered_commands:
            info.cls = _Command  # no command declares a class of its own
        cli.add_typer(group, name=name, cls=_Group)
    return cli


app = build_app()


def main() -> None:
    app()
