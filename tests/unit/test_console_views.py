"""What the console draws, from plain values (router/ui/views.py): the time axis of a job's
attempts, the reason a job waits, and a certification case in one row."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jobrouter.contracts.certification import CaseEvidence, RenderingEvidence
from jobrouter.models import Attempt, Job, JobEvent
from jobrouter.states import AttemptState, EventKind, JobState
from jobrouter.ui import views

T0 = 1_800_000_000.0


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def job(state: JobState = JobState.SUCCEEDED, error: str | None = None) -> Job:
    return Job.model_validate(
        {
            "id": "j1",
            "owner": "shop",
            "idempotency_key": "k",
            "fingerprint": "f",
            "task": "caption",
            "input": {},
            "params": {},
            "state": state,
            "version": 1,
            "error": error,
            "created_at": at(0),
            "updated_at": at(0),
            "deadline_at": at(120),
        }
    )


def attempt(seq: int, state: AttemptState, start: float, end: float | None, **more: Any) -> Attempt:
    return Attempt(
        id=f"a{seq}",
        job_id="j1",
        seq=seq,
        provider=f"p{seq}",
        state=state,
        started_at=at(start),
        finished_at=None if end is None else at(end),
        **more,
    )


def event(seq: int, kind: EventKind, moment: float, **data: Any) -> JobEvent:
    return JobEvent(
        job_id="j1", seq=seq, kind=kind, job_state=JobState.RUNNING, data=data, at=at(moment)
    )


def test_a_hedge_overlaps_the_attempt_it_hedges() -> None:
    """mutant: `hedge_of` looked up among later attempts (`other.seq > ...`): seen failing."""
    tries = [
        attempt(1, AttemptState.CANCELLED, 0.0, 8.0),
        attempt(2, AttemptState.SUCCEEDED, 2.0, 4.0),
    ]
    axis = views.timeline(job(), tries, [], now=T0 + 100)
    first, second = (lane.bars[0] for lane in axis.lanes)
    assert axis.span_s == 8.0 and first.left == 0.0 and first.width == 100.0
    assert second.left == 25.0 and second.width == 25.0
    assert axis.lanes[1].hedge_of == 1 and axis.lanes[0].hedge_of is None
    assert axis.ticks[-1].label == "+8.00 s"


def test_the_silence_before_unknown_then_the_wait_then_the_resolution() -> None:
    """The attempt's `finished_at` is the resolution's moment (a resolution rewrites it): the
    unknown moment is the one in the log.
    mutant: the unknown moment taken from `finished_at`: seen failing."""
    resolved = attempt(1, AttemptState.FAILED, 0.0, 10.0, resolved_by="token:1")
    events = [
        event(1, EventKind.ATTEMPT_UNKNOWN, 2.0, attempt_id="a1"),
        event(2, EventKind.ATTEMPT_FAILED, 10.0, attempt_id="a1", resolution={"outcome": "x"}),
    ]
    lane = views.timeline(job(JobState.FAILED), [resolved], events, now=T0 + 100).lanes[0]
    silence, waiting = lane.bars
    assert (silence.stretch, silence.left, silence.width) == (views.Stretch.SILENCE, 0.0, 20.0)
    assert (waiting.stretch, waiting.left, waiting.width) == (views.Stretch.WAITING, 20.0, 80.0)
    assert [(m.left, m.label) for m in lane.marks] == [(100.0, "resolved failed")]
    assert "no answer for 2.00 s" in lane.told and "resolved failed 8.00 s later" in lane.told


def test_an_unresolved_unknown_waits_until_now() -> None:
    """mutant: an unknown attempt drawn as one call bar (no silence, no wait): seen failing."""
    waiting = attempt(1, AttemptState.UNKNOWN, 0.0, 1.0)
    axis = views.timeline(job(JobState.UNKNOWN), [waiting], [], now=T0 + 4)
    stretches = [bar.stretch for bar in axis.lanes[0].bars]
    assert stretches == [views.Stretch.SILENCE, views.Stretch.WAITING]
    assert axis.span_s == 4.0 and "waiting for a person for 3.00 s" in axis.lanes[0].told


def test_a_tiny_bar_stays_visible_and_inside_the_axis() -> None:
    quick = attempt(1, AttemptState.SUCCEEDED, 999.999, 1000.0)
    bar = views.timeline(job(), [quick], [], now=T0 + 2000).lanes[0].bars[0]
    assert bar.width == views.MIN_WIDTH and bar.left + bar.width <= 100.0


def test_the_reason_is_the_attempts_summary_not_the_stored_command() -> None:
    """mutant: `reason` returning `job.error` for an unknown job: seen failing."""
    stuck = job(JobState.UNKNOWN, "check the provider, then `jobrouter resolve ATTEMPT_ID`")
    tries = [
        attempt(1, AttemptState.FAILED, 0, 1, error="p1 refused (HTTP 400)"),
        attempt(2, AttemptState.UNKNOWN, 1, 2, error="no answer within 10.0s"),
    ]
    assert views.reason(stuck, tries) == "#2 p2: no answer within 10.0s"


def test_spans_ages_and_deadlines_read_as_people_read_them() -> None:
    assert [views.span(s) for s in (0.3, 12.44, 245, 7500, 190000)] == [
        "0.30 s",
        "12.4 s",
        "4 min 5 s",
        "2 h 5 min",
        "2 d 4 h",
    ]
    assert views.deadline(job(), T0 + 60) == "in 1 min 0 s"
    assert views.deadline(job(), T0 + 180) == "passed 1 min 0 s ago"
    assert views.age(at(0), T0 + 30) == "30.0 s ago"


def test_a_case_in_one_row_our_count_against_the_providers() -> None:
    rendering = RenderingEvidence(
        ok=False,
        verdict="fail",
        prompt_tokens=42,
        count_basis="exact",
        reported_prompt_tokens=(51, None),
        tolerance=2,
        diagnosis="a template was added",
    )
    case = CaseEvidence(name="tea", passed=False, verdict="fail", rendering=rendering, runs=2)
    line = views.case_line(case)
    assert (line.ours, line.theirs, line.tolerance) == ("42 (exact)", "51", "±2")
    assert line.failing == "none" and line.diagnosis == "a template was added"
