"""How the CLI and the demo print jobs, attempts, events and the certification matrix: for
people, as text (never as rich markup: a provider's error or a job's input may hold `[/...]`,
which markup would eat or choke on), and for scripts, as one JSON document (`--json`).

The CLI reads the database itself: whoever runs it holds the database and is an operator, shown
the raw detail behind each error (`error_detail`, router/disclosure.py) as well as its summary."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

from jobrouter.listing import JobPage
from jobrouter.models import Attempt, Job, JobEvent
from jobrouter.states import AttemptState, JobState

if TYPE_CHECKING:
    from jobrouter.certifier import Cell

console = Console()
err = Console(stderr=True)

_ISO = TypeAdapter(datetime)
_COLOR = {JobState.SUCCEEDED: "green", JobState.FAILED: "red", JobState.UNKNOWN: "yellow"}


def _id_column(header: str) -> Column:
    """An id column: printed whole (32 characters) however narrow the terminal, since an id cut
    to `01a2318…` cannot be passed to `show` or `resolve`; the other columns give way."""
    return Column(header, no_wrap=True, min_width=32)


def _dump(value: BaseModel) -> dict[str, Any]:
    return value.model_dump(mode="json")


def job_document(
    job: Job, attempts: Sequence[Attempt] | None = None, events: Sequence[JobEvent] | None = None
) -> dict[str, Any]:
    """The JSON a script gets for one job: the job's fields (as the HTTP API has them), with
    its attempts and events when they were read."""
    document = {
        **_dump(job),
        "terminal": job.state.terminal,
        "needs_attention": job.state.needs_attention,
    }
    if attempts is not None:
        document["attempts"] = [_dump(a) for a in attempts]
    if events is not None:
        document["events"] = [_dump(e) for e in events]
    return document


def iso_utc(epoch: float) -> str:
    """Epoch seconds as the JSON of a job's times has them: ISO 8601 in UTC, `Z` at the end."""
    return str(_ISO.dump_python(datetime.fromtimestamp(epoch, UTC), mode="json"))


def print_json(document: Any) -> None:
    """One JSON document on stdout, not through rich (no wrapping, no colour, no markup)."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def print_job(console: Console, job: Job, attempts: Sequence[Attempt]) -> None:
    color = _COLOR.get(job.state, "cyan")
    console.print(
        Text.assemble(
            (job.id, "bold"),
            f" task={job.task} owner={job.owner} key={job.idempotency_key} state=",
            (str(job.state), color),
            f" version={job.version}",
        )
    )
    if job.result is not None:
        console.print(Text(json.dumps(job.result, ensure_ascii=False, indent=2)))
    if job.error:
        console.print(Text(job.error, style="red"))
    if job.error_detail:
        console.print(Text(f"detail: {job.error_detail}"))
    table = Table(
        "seq",
        _id_column("attempt id"),
        "provider",
        "state",
        "error kind",
        "latency ms",
        "error",
        title="attempts",
    )
    for a in attempts:
        winner = " (winner)" if a.id == job.winner_attempt_id else ""
        latency = f"{a.latency_ms:.0f}" if a.latency_ms is not None else ""
        table.add_row(
            *(
                Text(cell)
                for cell in (
                    str(a.seq),
                    a.id,
                    a.provider,
                    f"{a.state}{winner}",
                    a.error_kind or "",
                    latency,
                    (a.error or "")[:80],
                )
            )
        )
    console.print(table)
    for a in attempts:
        if a.error_detail:
            console.print(Text(f"attempt {a.seq} detail: {a.error_detail}"))
    for a in attempts:  # an answer kept for whoever resolves the attempt (docs/failures.md)
        if a.state is AttemptState.UNKNOWN and a.output is not None:
            console.print(
                Text(f"attempt {a.id} kept its answer: {json.dumps(a.output, ensure_ascii=False)}")
            )


def print_events(console: Console, events: Sequence[JobEvent]) -> None:
    table = Table("seq", "kind", "job state", "data", title="events")
    for e in events:
        table.add_row(
            *(
                Text(cell)
                for cell in (
                    str(e.seq),
                    e.kind,
                    e.job_state,
                    json.dumps(e.data, ensure_ascii=False)[:100],
                )
            )
        )
    console.print(table)


def print_page(console: Console, page: JobPage) -> None:
    table = Table(
        _id_column("job id"),
        "created (UTC)",
        "owner",
        "task",
        Column("state", no_wrap=True, min_width=9),
        "key",
        "error",
        title="jobs, newest first",
    )
    for job in page.items:
        table.add_row(
            Text(job.id),
            Text(job.created_at.strftime("%Y-%m-%d %H:%M:%S")),
            Text(job.owner),
            Text(job.task),
            Text(str(job.state), style=_COLOR.get(job.state, "cyan")),
            Text(job.idempotency_key),
            Text((job.error or "")[:60]),
        )
    console.print(table)
    if page.next_cursor:
        console.print(Text(f"more: --cursor {page.next_cursor}"))


def page_document(page: JobPage, counts: dict[JobState, int] | None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "items": [job_document(job) for job in page.items],
        "next_cursor": page.next_cursor,
    }
    if counts is not None:
        document["counts"] = {str(state): n for state, n in counts.items()}
    return document


_STYLE = {
    "pass": "green",
    "fail": "red",
    "unverified": "yellow",
    "stale": "yellow",
    "expired": "yellow",
    "missing": "dim",
}


def render_matrix(cells: Sequence[Cell], width: int = 110) -> str:
    """The matrix as text: providers down, contracts across. A cell that is not a pass names
    its failing (or unverified) checks on its first line, before any detail; a pass under a
    waiver says which check it waives."""
    contracts = sorted({c.contract for c in cells})
    providers = list(dict.fromkeys(c.provider for c in cells))
    by_pair = {(c.provider, c.contract): c for c in cells}
    table = Table("provider", *contracts, title="certification matrix", show_lines=True)
    for name in providers:
        row = []
        for contract in contracts:
            cell = by_pair.get((name, contract))
            if cell is None:
                row.append("")
                continue
            head, detail = cell_text(cell)
            more = f"\n{escape(detail)}" if detail else ""
            row.append(f"[{_STYLE[cell.status]}]{escape(head)}[/]{more}")
        table.add_row(escape(name), *row)
    out = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    out.print(table)
    return out.export_text()


def cell_text(cell: Cell) -> tuple[str, str]:
    """(first line: the status and the checks that decided it, short detail)."""
    from jobrouter.contracts import Validity  # loaded already: the cell came from `matrix`

    cert = cell.certification
    if cert is None or cell.status.outdated:
        return cell.status, _short(cell.detail)
    cases = f"{sum(case.passed for case in cert.cases)}/{len(cert.cases)} cases"
    if cell.status is Validity.FAIL:
        return f"fail: {', '.join(cert.failed_checks)}", _short(
            f"{cases}; {cert.first_failure or cell.detail}"
        )
    if cell.status is Validity.UNVERIFIED:
        return f"unverified: {', '.join(cert.unverified_checks)}", _short(
            f"{cases}; no waiver; {cert.first_failure or cell.detail}"
        )
    waived = [c for c in cert.waivers if c in cert.unverified_checks]
    if waived:
        reasons = "; ".join(cert.waivers[c] for c in waived)
        return f"pass, waived: {', '.join(waived)} unverified", _short(reasons)
    return cell.status, ""


def _short(detail: str) -> str:
    return detail if len(detail) <= 70 else detail[:67] + "..."
