"""`jobrouter config check`: validate a config file and say where each task would route."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from jobrouter.cli.common import ConfigOpt, JsonOpt
from jobrouter.config import config_path
from jobrouter.config_check import CheckReport, check_config
from jobrouter.exits import Exit
from jobrouter.printing import console, err, print_json

config_app = typer.Typer(help="The configuration file.", no_args_is_help=True)


@config_app.command("check")
def check(
    file: Annotated[
        Path | None,
        typer.Argument(
            help="the file to check (default: --config, $JOBROUTER_CONFIG or ./jobrouter.toml)",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Report every problem of a config file (exit 1), or where each task routes (exit 0)."""
    report = check_config(config_path(file or config))
    if as_json:
        print_json(
            {
                "file": report.file,
                "valid": not report.problems,
                "problems": [asdict(p) for p in report.problems],
                "database": report.database,
                "routes": [asdict(r) for r in report.routes],
            }
        )
    else:
        _print(report)
    raise typer.Exit(Exit.ERROR if report.problems else Exit.OK)


def _print(report: CheckReport) -> None:
    for problem in report.problems:
        err.print(
            Text.assemble(("error:", "red"), f" {report.file}: {problem.key}: {problem.message}")
        )
    if report.problems:
        return
    console.print(Text(f"{report.file}: valid; database {report.database}"))
    for route in report.routes:  # one line per task: easy to read and to grep
        providers = " -> ".join(f"{name} ({model})" for name, model in route.providers)
        hedge = f", hedge after {route.hedge_after}s" if route.hedge_after is not None else ""
        console.print(
            Text(
                f"{route.task}: {providers}  [contract {route.contract or '(none)'}, "
                f"side effects {route.side_effects}, at most {route.max_attempts} "
                f"attempts{hedge}]"
            ),
            soft_wrap=True,
        )
    if not report.routes:
        console.print("no [tasks.NAME] sections: nothing routes anywhere yet", markup=False)


@config_app.command("reference")
def reference() -> None:
    """Print the reference of every config key (Markdown; docs/config-reference.md)."""
    from jobrouter.config_doc import render_reference

    print(render_reference(), end="")
