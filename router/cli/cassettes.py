"""`jobrouter cassettes check`: no secrets, and nothing recorded under stale fingerprints."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jobrouter.build import build_providers, build_tasks
from jobrouter.cli.common import ConfigOpt, settings
from jobrouter.demo import DEMO_GROUP, demo_fingerprint
from jobrouter.printing import console, err

cassettes_app = typer.Typer(
    help="Recorded provider interactions (vcrpy), replayed in CI.", no_args_is_help=True
)


@cassettes_app.command("check")
def check(
    root: Annotated[Path, typer.Argument(help="the cassette folder")] = Path("cassettes"),
    config: ConfigOpt = None,
) -> None:
    """Fail on any secret-looking value, and on cassettes whose provider or contract
    fingerprint no longer matches the config (stale): lists what to re-record and how."""
    from jobrouter.providers.cassettes import Expected, check_cassettes

    cfg = settings(config)
    providers = build_providers(cfg, None)
    contracts = {
        t.contract.name: t.contract_fingerprint or ""
        for t in build_tasks(cfg).values()
        if t.contract is not None
    }
    fingerprints = {n: p.fingerprint for n, p in providers.items()}
    # The demo's job cassette spans every provider: it goes stale when any of them changes.
    fingerprints[DEMO_GROUP] = demo_fingerprint(providers)
    expected = Expected(providers=fingerprints, contracts=contracts)
    if not root.is_dir():
        err.print(f"[red]error:[/red] no cassette folder {root}")
        raise typer.Exit(2)
    problems = check_cassettes(root, expected)
    if not problems:
        count = sum(1 for _ in root.rglob("*.yaml"))
        console.print(f"[green]ok[/green]: {count} cassettes under {root}, no secrets, none stale")
        return
    for problem in problems:
        err.print(f"[red]{problem.kind}[/red] {problem.path}: {problem.detail}")
    stale = sorted(
        {
            p.path.parent.name if p.path.is_file() else p.path.name
            for p in problems
            if p.kind == "stale"
        }
    )
    if stale:
        err.print(
            "re-record with the local servers running: jobrouter contracts run "
            f"--cassettes {root} --record --contract NAME   (stale: {', '.join(stale)})"
        )
    raise typer.Exit(1)
