"""How the CLI and the demo print jobs, attempts, events and the certification matrix: for
people, as text (never as rich markup: a provider's error or a job's input may hold `[/...]`,
which markup would eat or choke on), and for scripts, as one JSON document (`--json`).

The CLI reads the database itself: whoever runs it holds the database and is an operator, shown
the raw detail behind each error (`error_detail`, router/disclosure.py) as well as its summary."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter
from rich.cells import cell_len
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


def follow_terminal_width() -> None:
    """Print at the width of now: rich reads $COLUMNS once, when a Console is made (this module's
    import), so a second command in the same process (an embedding service, a test's CliRunner)
    would print at the first one's width."""
    width = Console().width
    console.width = width
    err.width = width


_ISO = TypeAdapter(datetime)
_COLOR = {JobState.SUCCEEDED: "green", JobState.FAILED: "red", JobState.UNKNOWN: "yellow"}


@dataclass(frozen=True)
class Col:
    """A column of a table for people. `whole`: no word of it is ever cut (ids, states, provider
    and event names: `succ…` or `prov…` says nothing, and an id cut to `01a2318…` cannot be
    passed to `show` or `resolve`); the others wrap, folding a long word (a key, a URL) if need
    be. `drop`: where the column stands in the order of leaving columns out on a narrow
    terminal (1 first; 0 never)."""

    header: str
    whole: bool = False
    drop: int = 0


FOLD_MIN = 10  # a wrapping column keeps this many characters a line, or its longest word

ATTEMPT_COLUMNS = (
    Col("seq", whole=True),
    Col("attempt id", whole=True),
    Col("provider", whole=True),
    Col("state", whole=True),
    Col("error kind", whole=True, drop=2),
    Col("latency ms", drop=1),
    Col("error", drop=3),
)
EVENT_COLUMNS = (
    Col("seq", whole=True),
    Col("kind", whole=True),
    Col("job state", whole=True),
    Col("data"),
)
PAGE_COLUMNS = (
    Col("job id", whole=True),
    Col("created (UTC)", whole=True, drop=2),
    Col("owner", drop=3),
    Col("task", whole=True),
    Col("state", whole=True),
    Col("key", drop=4),
    Col("error", drop=1),
)


TableCell = str | Text  # a Text only to style data (a state's colour), never to mark it up


def fitted_table(
    console: Console, columns: Sequence[Col], rows: Sequence[Sequence[TableCell]], title: str = ""
) -> tuple[Table, list[str]]:
    """A table that fits the console: columns it cannot hold with every word readable are left
    out, lowest priority first (named in the list returned, to say so); none is ever cut to an
    ellipsis. The widths are decided here, not by rich, whose squeezing cuts words. Cells are
    data, so text, never markup."""
    texts = [[cell if isinstance(cell, Text) else Text(cell) for cell in row] for row in rows]
    needs = [_need(col, [row[i].plain for row in texts]) for i, col in enumerate(columns)]
    kept = list(range(len(columns)))
    droppable = sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: columns[i].drop)
    for index in droppable:
        if sum(needs[i] + 3 for i in kept) + 1 <= console.width:
            break
        kept.remove(index)
    wants = {i: _natural(columns[i], [row[i].plain for row in texts]) for i in kept}
    widths = {i: needs[i] for i in kept}
    spare = console.width - sum(widths[i] + 3 for i in kept) - 1
    while spare > 0:  # one character at a time, to the column that lacks the most
        short = max(kept, key=lambda i: wants[i] - widths[i])
        if wants[short] <= widths[short]:
            break
        widths[short] += 1
        spare -= 1
    table = Table(title=title or None)
    for i in kept:
        table.add_column(columns[i].header, width=widths[i], overflow="fold")
    for row in texts:
        table.add_row(*(row[i] for i in kept))
    return table, [columns[i].header for i in range(len(columns)) if i not in kept]


def _need(col: Col, cells: Sequence[str]) -> int:
    """The width under which the column would cut a word it must keep whole."""
    longest = max((cell_len(word) for cell in cells for word in cell.split()), default=0)
    header = max((cell_len(word) for word in col.header.split()), default=0)
    return max(header, longest if col.whole else min(longest, FOLD_MIN))


def _natural(col: Col, cells: Sequence[str]) -> int:
    """The width that holds each of the column's lines unwrapped."""
    lines = [line for text in (col.header, *cells) for line in text.splitlines()]
    return max((cell_len(line) for line in lines), default=0)


def print_fitted(
    console: Console,
    columns: Sequence[Col],
    rows: Sequence[Sequence[TableCell]],
    title: str = "",
) -> None:
    """`fitted_table` printed, and after it which columns it left out."""
    table, left_out = fitted_table(console, columns, rows, title)
    console.print(table)
    if left_out:
        console.print(
            Text(
                f"(left out at {console.width} columns: {', '.join(left_out)}; "
                "a wider terminal shows them)"
            )
        )


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
    rows = [
        (
            str(a.seq),
            a.id,
            a.provider,
            f"{a.state}{' (winner)' if a.id == job.winner_attempt_id else ''}",
            a.error_kind or "",
            f"{a.latency_ms:.0f}" if a.latency_ms is not None else "",
            (a.error or "")[:80],
        )
        for a in attempts
    ]
    print_fitted(console, ATTEMPT_COLUMNS, rows, "attempts")
    for a in attempts:
        if a.error_detail:
            console.print(Text(f"attempt {a.seq} detail: {a.error_detail}"))
    for a in attempts:  # an answer kept for whoever resolves the attempt (docs/failures.md)
        if a.state is AttemptState.UNKNOWN and a.output is not None:
            console.print(
                Text(f"attempt {a.id} kept its answer: {json.dumps(a.output, ensure_ascii=False)}")
            )


def print_events(console: Console, events: Sequence[JobEvent]) -> None:
    rows = [
        (str(e.seq), e.kind, e.job_state, json.dumps(e.data, ensure_ascii=False)[:100])
        for e in events
    ]
    print_fitted(console, EVENT_COLUMNS, rows, "events")


def print_page(console: Console, page: JobPage) -> None:
    rows = [
        (
            job.id,
            job.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            job.owner,
            job.task,
            Text(str(job.state), style=_COLOR.get(job.state, "cyan")),
            job.idempotency_key,
            (job.error or "")[:60],
        )
        for job in page.items
    ]
    print_fitted(console, PAGE_COLUMNS, rows, "jobs, newest first")
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
    "suspended": "red",
    "unverified": "yellow",
    "stale": "yellow",
    "expired": "yellow",
    "missing": "dim",
}


def render_matrix(cells: Sequence[Cell], width: int = 110) -> str:
    """The matrix as text: providers down, contracts across. A cell that is not a pass names
    its failing (or unverified) checks on its first line, before any detail; a pass under a
    waiver says which check it waives. Contracts that do not fit across the width with their
    names and statuses whole go on in a second table below (and a third...)."""
    contracts = sorted({c.contract for c in cells})
    providers = list(dict.fromkeys(c.provider for c in cells))
    by_pair = {(c.provider, c.contract): c for c in cells}
    out = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    for part, group in enumerate(_across(width, providers, contracts, by_pair)):
        title = "certification matrix" + (f" (continued, {part + 1})" if part else "")
        table = Table(
            Column("provider", no_wrap=True),  # a name cut short names nothing
            *(Column(contract, overflow="fold") for contract in group),
            title=title,
            show_lines=True,
        )
        for name in providers:
            row = []
            for contract in group:
                cell = by_pair.get((name, contract))
                if cell is None:
                    row.append("")
                    continue
                head, detail = cell_text(cell)
                more = f"\n{escape(detail)}" if detail else ""
                row.append(f"[{_STYLE[cell.status]}]{escape(head)}[/]{more}")
            table.add_row(escape(name), *row)
        out.print(table)
    return out.export_text()


def _across(
    width: int, providers: list[str], contracts: list[str], by_pair: dict[tuple[str, str], Cell]
) -> list[list[str]]:
    """The contracts in groups that fit across `width` beside the provider column, each column
    as wide as its name and the longest word of its cells' first lines."""

    def need(contract: str) -> int:
        heads = [cell_text(by_pair[p, contract])[0] for p in providers if (p, contract) in by_pair]
        return max(cell_len(w) for w in [contract, *" ".join(heads).split()]) + 3

    room = width - max(cell_len(p) for p in ["provider", *providers]) - 4
    groups: list[list[str]] = [[]]
    used = 0
    for contract in contracts:
        if groups[-1] and used + need(contract) > room:
            groups.append([])
            used = 0
        groups[-1].append(contract)
        used += need(contract)
    return groups


def matrix_width(piped: int = 110) -> int:
    """The width to render the matrix at: the terminal's (or $COLUMNS), else `piped`, the width
    it always had when printed to a file or a pipe."""
    return console.width if console.is_terminal or os.environ.get("COLUMNS") else piped


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
    if cell.status is Validity.SUSPENDED:
        return "suspended (live answers)", _short(cell.detail)
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
