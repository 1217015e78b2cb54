"""What the console's pages draw, worked out from plain values (no I/O): a job's attempts on a
time axis, the reason a job waits for a person in our own words, ages and deadlines, and a
certification case in one line. The templates only place what these return."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from jobrouter.contracts.certification import CaseEvidence
from jobrouter.models import Attempt, Job, JobEvent
from jobrouter.states import AttemptState, EventKind, JobState

MIN_WIDTH = 0.8  # percent: a 10 ms call next to an hour's wait must still show as a bar
TICKS = 4  # intervals between the axis labels


class Stretch(StrEnum):
    """What a piece of an attempt's lane shows."""

    CALL = "call"  # the provider call, from start to its answer (or to now, in flight)
    SILENCE = "silence"  # the call that never answered, from start until it was declared unknown
    WAITING = "waiting"  # unknown: waiting for a person, until resolved (or now)


@dataclass(frozen=True)
class Bar:
    stretch: Stretch
    left: float  # percent of the axis
    width: float
    label: str


@dataclass(frozen=True)
class Mark:
    left: float
    label: str


@dataclass(frozen=True)
class Lane:
    attempt: Attempt
    bars: list[Bar]
    marks: list[Mark] = field(default_factory=list)
    hedge_of: int | None = None  # the seq of an attempt still in flight when this one started
    told: str = ""  # the lane in words: what a screen reader (and a test) reads


@dataclass(frozen=True)
class Axis:
    lanes: list[Lane]
    ticks: list[Mark]
    span_s: float


def span(seconds: float) -> str:
    """A duration as a person reads it: `0.30 s`, `12.4 s`, `4 min 5 s`, `3 h 2 min`, `2 d 3 h`."""
    s = abs(seconds)
    if s < 10:
        return f"{s:.2f} s"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


def age(moment: datetime, now: float) -> str:
    return f"{span(now - moment.timestamp())} ago"


def deadline(job: Job, now: float) -> str:
    if job.deadline_at is None:
        return "none"
    left = job.deadline_at.timestamp() - now
    return f"in {span(left)}" if left >= 0 else f"passed {span(left)} ago"


def reason(job: Job, attempts: Sequence[Attempt]) -> str:
    """Why a job waits for a person, in our words: each unknown attempt's own summary (never a
    provider's words, nor a command to type: the console's forms are beside it)."""
    unknown = [a for a in attempts if a.state is AttemptState.UNKNOWN]
    if not unknown:
        return "waiting for a person" if job.state is JobState.UNKNOWN else (job.error or "")
    parts = [f"#{a.seq} {a.provider}: {a.error or 'outcome unknown'}" for a in unknown]
    return "; ".join(parts)


def timeline(job: Job, attempts: Sequence[Attempt], events: Sequence[JobEvent], now: float) -> Axis:
    """The attempts on one time axis from the job's creation: hedges overlap, the silence of a
    call that never answered leads to `unknown`, then the wait for a person to its resolution."""
    times = [_times(a, events, now) for a in attempts]
    origin = job.created_at.timestamp()
    length = max(max([origin, *(t.end for t in times)]) - origin, 1e-3)

    def at(moment: float) -> float:
        return (moment - origin) / length * 100

    lanes = [_lane(a, t, times, at, origin) for a, t in zip(attempts, times, strict=True)]
    ticks = [Mark(100 * i / TICKS, f"+{span(length * i / TICKS)}") for i in range(TICKS + 1)]
    return Axis(lanes=lanes, ticks=ticks, span_s=length)


@dataclass(frozen=True)
class _Times:
    seq: int
    start: float
    end: float  # of the lane: the answer, the resolution, or now
    unknown: float | None = None  # declared unknown (the call's silence ends here)
    resolved: float | None = None

    @property
    def call_end(self) -> float:
        return self.end if self.unknown is None else self.unknown


def _times(attempt: Attempt, events: Sequence[JobEvent], now: float) -> _Times:
    """When the call started and ended, when it was declared unknown, when it was resolved.
    A resolution rewrites `finished_at`, so the unknown moment comes from the job's log."""
    mine = [e for e in events if e.data.get("attempt_id") == attempt.id]
    unknown = next((e.at.timestamp() for e in mine if e.kind is EventKind.ATTEMPT_UNKNOWN), None)
    resolved = next((e.at.timestamp() for e in mine if "resolution" in e.data), None)
    finished = attempt.finished_at.timestamp() if attempt.finished_at else None
    if attempt.state is AttemptState.UNKNOWN and unknown is None:
        unknown = finished
    start = attempt.started_at.timestamp()
    if unknown is None:
        return _Times(attempt.seq, start, finished or now)
    return _Times(attempt.seq, start, resolved or now, unknown, resolved)


def _lane(
    attempt: Attempt,
    t: _Times,
    every: Sequence[_Times],
    at: Callable[[float], float],
    origin: float,
) -> Lane:
    hedge_of = next(
        (o.seq for o in every if o.seq < t.seq and o.start <= t.start < o.call_end), None
    )
    told = [f"#{attempt.seq} {attempt.provider}: started +{span(t.start - origin)}"]
    if hedge_of is not None:
        told.append(f"hedged while #{hedge_of} was in flight")
    marks: list[Mark] = []
    if t.unknown is None:
        took = span(t.end - t.start)
        bars = [_bar(Stretch.CALL, at(t.start), at(t.end), f"{attempt.state.value} {took}")]
        told.append(f"{attempt.state.value} after {took}")
        return Lane(attempt, bars, marks, hedge_of, "; ".join(told))
    silent, waited = span(t.unknown - t.start), span(t.end - t.unknown)
    bars = [
        _bar(Stretch.SILENCE, at(t.start), at(t.unknown), f"no answer for {silent}"),
        _bar(Stretch.WAITING, at(t.unknown), at(t.end), f"unknown for {waited}"),
    ]
    told.append(f"no answer for {silent}, then unknown")
    if t.resolved is None:
        told.append(f"waiting for a person for {waited}")
    else:
        marks.append(Mark(at(t.resolved), f"resolved {attempt.state.value}"))
        told.append(f"resolved {attempt.state.value} {waited} later")
    return Lane(attempt, bars, marks, hedge_of, "; ".join(told))


def _bar(stretch: Stretch, left: float, right: float, label: str) -> Bar:
    width = max(right - left, MIN_WIDTH)
    return Bar(stretch, min(left, 100 - width), width, label)


@dataclass(frozen=True)
class CaseLine:
    """A certification case in one row: verdict, failing check, the two token counts."""

    name: str
    verdict: str
    failing: str
    ours: str
    theirs: str
    tolerance: str
    diagnosis: str


def case_line(case: CaseEvidence) -> CaseLine:
    rendering = case.rendering
    ours = "" if rendering.prompt_tokens is None else str(rendering.prompt_tokens)
    if ours and rendering.count_basis:
        ours += f" ({rendering.count_basis})"
    reported = [str(n) for n in rendering.reported_prompt_tokens if n is not None]
    return CaseLine(
        name=case.name,
        verdict=case.verdict,
        failing=", ".join(case.failed_checks) or ("unverified" if case.unverified else "none"),
        ours=ours or "not counted",
        theirs=", ".join(reported) or "not reported",
        tolerance="" if rendering.tolerance is None else f"±{rendering.tolerance}",
        diagnosis=rendering.diagnosis or "",
    )
