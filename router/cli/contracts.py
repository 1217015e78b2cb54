"""`jobrouter contracts run | status`: certify providers per contract, and show the matrix."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from xml.etree import ElementTree as ET

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from jobrouter.api import Router
from jobrouter.certifier import Cell, Pair
from jobrouter.cli.common import ConfigOpt, DatabaseOpt, run, settings
from jobrouter.compare_recorded import compare_pairs, warnings_of
from jobrouter.config import RouterConfig
from jobrouter.printing import matrix_width, render_matrix
from jobrouter.recordings import LIVE_RECORD, recording
from jobrouter.store.live_watch import WatchRow

if TYPE_CHECKING:
    from jobrouter.contracts import CaseEvidence, Certification
    from jobrouter.contracts.compare import Comparison
    from jobrouter.contracts.lint import ContractWarning

contracts_app = typer.Typer(
    help="Certify providers against task contracts; see the matrix.", no_args_is_help=True
)


@contracts_app.command("run")
def run_contracts(
    provider: Annotated[str | None, typer.Option(help="only this provider")] = None,
    contract: Annotated[str | None, typer.Option(help="only this contract")] = None,
    json_report: Annotated[Path | None, typer.Option(help="write a JSON report here")] = None,
    junit: Annotated[Path | None, typer.Option(help="write JUnit XML here")] = None,
    cassettes: Annotated[
        Path | None,
        typer.Option(help="replay provider calls from this cassette folder (no network)"),
    ] = None,
    record: Annotated[
        bool, typer.Option(help="with --cassettes: call the real providers and record them")
    ] = False,
    compare_recorded: Annotated[
        Path | None,
        typer.Option(
            help="call each provider live and hold its verdicts against the certification "
            "recorded in this cassette folder: same / differs per cell; keeps nothing; exit 1 "
            "unless every cell is the same"
        ),
    ] = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Run the golden cases of each (provider, contract) pair the config routes, record the
    certifications, print the matrix and the contracts' warnings; exit 1 if any pair fails."""
    if record and cassettes is None:
        raise typer.BadParameter("--record needs --cassettes DIR (where to write)")
    if compare_recorded is not None:
        if cassettes is not None:
            raise typer.BadParameter("--compare-recorded calls the providers live: no --cassettes")
        _compare(compare_recorded, provider, contract, json_report, config, database)
        return
    made: list[Certification] = []
    routed: list[Pair] = []

    async def step() -> list[Cell]:
        cfg = settings(config)
        async with Router.open(database, cfg, run_workers=False) as router:
            pairs = router.pairs_to_certify(provider=provider, contract=contract)
            routed.extend(pairs)
            total = sum(len(p.contract.cases) * p.contract.sampling.repeats for p in pairs)
            with _progress() as bar:
                overall = bar.add_task("certifying", total=total)
                for pair in pairs:
                    label = f"{pair.provider} x {pair.contract.name}"
                    bar.update(overall, description=label)
                    with recording(cassettes, record, router.provider(pair.provider), pair):
                        certification = await router.certify(
                            pair, progress=lambda case, done, runs: bar.advance(overall)
                        )
                    made.append(certification)
                    if record and cassettes is not None:
                        live = cassettes / pair.provider / pair.contract.name / LIVE_RECORD
                        live.write_text(certification.model_dump_json(indent=2) + "\n")
            return await router.certification_matrix(pairs)

    cells = run(step)
    print(render_matrix(cells, width=matrix_width()))
    warnings = warnings_of(routed, made)
    for warning in warnings:
        print(warning)
    if json_report:
        json_report.write_text(json.dumps(report(cells, warnings), indent=2) + "\n")
    if junit:
        junit.write_text(junit_xml(cells))
    if not all(cell.status.valid for cell in cells):
        raise typer.Exit(1)


def _compare(
    root: Path,
    provider: str | None,
    contract: str | None,
    json_report: Path | None,
    config: Path | None,
    database: str | None,
) -> None:
    """Certify live, compare with the recordings, print one line per cell (and the cases that
    differ, with both outputs); exit 1 unless every cell is the same."""
    from jobrouter.contracts.compare import Outcome

    async def step() -> list[Comparison]:
        cfg = settings(config)
        async with Router.open(database, cfg, run_workers=False) as router:
            pairs = router.pairs_to_certify(provider=provider, contract=contract)
            return await compare_pairs(router, cfg, pairs, root)

    comparisons = run(step)
    for comparison in comparisons:
        print("\n".join(comparison.lines()))
    if json_report:
        cells = [c.as_json() for c in comparisons]
        json_report.write_text(json.dumps({"comparisons": cells}, indent=2) + "\n")
    if not comparisons or any(c.outcome is not Outcome.SAME for c in comparisons):
        raise typer.Exit(1)


@contracts_app.command("check")
def check_contracts(config: ConfigOpt = None, database: DatabaseOpt = None) -> None:
    """Warn about contract settings that make a certification a matter of luck: agreement on
    free text under min_agreement 1.0, and (in the stored certifications of the contracts as
    they are now) answers cut off at max_tokens. Calls no provider; exit 0 either way."""
    cfg = run(lambda: _settings(config))

    async def step() -> list[ContractWarning]:
        async with Router.open(database, cfg, run_workers=False) as router:
            pairs = router.pairs_to_certify()
            cells = await router.certification_matrix(pairs)
            stored = [c.certification for c in cells if c.certification is not None]
            return warnings_of(pairs, stored)

    warnings = run(step)
    for warning in warnings:
        print(warning)
    if not warnings:
        print("no warnings")


@contracts_app.command("status")
def status(
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help=("print the report as JSON: every cell with its full certification record"),
        ),
    ] = False,
) -> None:
    """Print the provider x contract matrix from the store and the contracts' warnings, without
    calling any provider."""

    async def load() -> RouterConfig:
        return settings(config)  # a config error becomes one line and exit code 2

    cfg = run(load)

    async def step() -> tuple[list[Cell], list[ContractWarning]]:
        async with Router.open(database, cfg, run_workers=False) as router:
            pairs = router.pairs_to_certify()
            cells = await router.certification_matrix(pairs)
            stored = [c.certification for c in cells if c.certification is not None]
            return cells, warnings_of(pairs, stored)

    uncertified = uncertified_tasks(cfg)
    routed = any(task.contract is not None for task in cfg.tasks.values()) or not uncertified
    cells, warnings = run(step) if routed else ([], [])
    if as_json:
        whole = {**report(cells, warnings), **({"uncertified": uncertified} if uncertified else {})}
        print(json.dumps(whole, indent=2))
        return
    if routed:
        print(render_matrix(cells, width=matrix_width()))
    for warning in warnings:
        print(warning)
    for line in uncertified:
        print(line)


@contracts_app.command("reinstate")
def reinstate_pair(
    provider: Annotated[str, typer.Option(help="the suspended provider")],
    contract: Annotated[str, typer.Option(help="the contract it was suspended for")],
    reason: Annotated[
        str, typer.Option(help="what you checked (kept with the reinstatement, and who you are)")
    ],
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Bring back a provider its live answers suspended, without certifying it again: on your
    word, recorded (who, why, when); its live watch starts from zero. Prefer `contracts run`,
    which proves the provider is fixed."""
    from jobrouter.resolution import by_os_user

    cfg = run(lambda: _settings(config))

    async def step() -> None:
        async with Router.open(database, cfg, run_workers=False) as router:
            await router.reinstate(
                provider=provider, contract=contract, reason=reason, by=by_os_user()
            )

    run(step)  # a refusal (not suspended, not routed, no reason): one red line, exit 1
    print(f"provider {provider} reinstated for contract {contract}: {reason}")


async def _settings(config: Path | None) -> RouterConfig:
    return settings(config)  # a config error becomes one line and exit code 2


def uncertified_tasks(cfg: RouterConfig) -> list[str]:
    """One line per task that runs without certification, and why (the matrix omits them)."""
    lines = []
    for name, task in sorted(cfg.tasks.items()):
        if task.contract is None:
            lines.append(
                f'task {name}: UNCERTIFIED, no contract (certification = "none"); '
                f"any of {', '.join(task.providers)} may run it"
            )
        elif not cfg.certification.required:
            lines.append(f"task {name}: UNCERTIFIED, [certification] required = false")
    return lines


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not sys.stderr.isatty(),
    )


def report(cells: Sequence[Cell], warnings: Sequence[ContractWarning] = ()) -> dict[str, object]:
    """Every cell with its status, the checks that decided it, and the full record; the
    contracts' warnings (`jobrouter.contracts.lint`)."""
    return {
        "warnings": [dataclasses.asdict(warning) for warning in warnings],
        "passed": all(c.status.valid for c in cells),
        "cells": [
            {
                "provider": c.provider,
                "contract": c.contract,
                "status": c.status,
                "detail": c.detail,
                "failed_checks": list(c.certification.failed_checks) if c.certification else [],
                "unverified_checks": list(c.certification.unverified_checks)
                if c.certification
                else [],
                "certification": c.certification.model_dump(mode="json")
                if c.certification
                else None,
                "live": live_report(c.watch),
            }
            for c in cells
        ],
    }


def live_report(watch: WatchRow | None) -> dict[str, object]:
    """What the pair's live answers showed since its certification (or reinstatement)."""
    if watch is None:
        return {"answered": 0, "failed": 0, "suspension": None, "reinstated": None}
    return {
        "answered": watch.answered,
        "failed": watch.failed,
        "rendering_checked": watch.rendering_checked,
        "rendering_off": watch.rendering_off,
        "recent_failures": [{"attempt_id": a, "failure": f} for a, f in watch.recent_failures],
        "suspension": None if watch.suspension is None else dataclasses.asdict(watch.suspension),
        "reinstated": None if watch.reinstated is None else dataclasses.asdict(watch.reinstated),
    }


def junit_xml(cells: Sequence[Cell]) -> str:
    """One test case per provider x contract x golden case; a failure's `message` names the
    failing checks first, its `type` is the verdict, and its text holds every failure line and
    the rendering evidence (both prompt counts, the split markers)."""
    suite = ET.Element("testsuite", name="jobrouter-contracts")
    count = failures = 0
    for cell in cells:
        cases = cell.certification.cases if cell.certification else ()
        for case in cases:
            count += 1
            node = ET.SubElement(
                suite, "testcase", classname=f"{cell.provider}.{cell.contract}", name=case.name
            )
            if not case.passed or cell.status.outdated:
                failures += 1
                lines = [str(f) for f in case.failures] or list(case.rendering.unverified)
                if case.failures:
                    head = f"failed checks: {', '.join(case.failed_checks)}"
                elif case.unverified:
                    head = f"unverified (no waiver): {', '.join(case.unverified)}"
                else:
                    head, lines = cell.status, [cell.detail]
                failure = ET.SubElement(
                    node, "failure", type=case.verdict, message="; ".join([head, *lines])[:500]
                )
                failure.text = _case_evidence(case)
        if not cases:
            count += 1
            failures += 1
            node = ET.SubElement(suite, "testcase", classname=cell.provider, name=cell.contract)
            ET.SubElement(node, "failure", type=cell.status, message=cell.detail)
    suite.set("tests", str(count))
    suite.set("failures", str(failures))
    return ET.tostring(suite, encoding="unicode") + "\n"


def _case_evidence(case: CaseEvidence) -> str:
    r = case.rendering
    lines = [str(f) for f in case.failures]
    lines += [f"unverified: {reason}" for reason in r.unverified]
    if case.stability is not None:
        lines.append(f"stability: {case.stability}")
    lines.append(
        f"rendering {r.verdict}: product counted {r.prompt_tokens} prompt tokens "
        f"({r.tokenizer}, {r.count_basis}), provider reported "
        f"{list(r.reported_prompt_tokens)}, tolerance {r.tolerance}"
    )
    lines += [f"marker {m.marker!r} -> {list(m.token_ids)} special={m.special}" for m in r.markers]
    if r.rendered is not None:
        lines.append(f"rendered prompt: {r.rendered!r}")
    return "\n".join(lines)
