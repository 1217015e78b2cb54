"""`jobrouter demo`: the story of router/demo.py on a fresh SQLite file, offline."""

from __future__ import annotations

import tempfile
from typing import Annotated

import typer

from jobrouter.cli.common import run
from jobrouter.demo import CONFIG, story
from jobrouter.printing import err


def demo(
    record: Annotated[
        bool, typer.Option(help="run against the live local servers and record the job calls")
    ] = False,
    database: Annotated[
        str | None,
        typer.Option(help="database URL (default: a new SQLite file in a temporary folder)"),
    ] = None,
) -> None:
    """The whole story, offline, from recorded cassettes: start here.

    Certify providers, submit real shop jobs, and watch: a duplicate submit, a silent primary
    becoming unknown, failover past an uncertified provider, hedging, and a late result losing
    the compare-and-swap."""
    if not CONFIG.exists():
        err.print(
            f"[red]error:[/red] {CONFIG} is missing: this installation lacks the "
            "demo's cassettes (package data of jobrouter)"
        )
        raise typer.Exit(2)
    url = database or f"sqlite:///{tempfile.mkdtemp(prefix='jobrouter-demo-')}/demo.db"
    run(lambda: story(url, record))
