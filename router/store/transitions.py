"""The steps of a write transaction that jobs, attempts and claims share: lock a job (or an
attempt's job), move a job or an attempt through the transition table (router/states.py),
number and append events, write the outbox row of a terminal change (starting attempts is
starts.py's). Plain functions
over the open transaction and the loaded queries: the job store's parts share these, not each
other's members, and the store's one seam is the connector.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobrouter.errors import AttemptNotFound, InvalidTransition, JobNotFound
from jobrouter.models import Attempt, AttemptUsage, Job, NewEvent, new_id
from jobrouter.states import (
    AttemptState,
    EndReason,
    EventKind,
    JobState,
    attempt_can_move,
    job_can_move,
)
from jobrouter.store.connector import Tx
from jobrouter.store.live_watch import LiveVerdict, verdict_columns
from jobrouter.store.outbox import OutboxWritten
from jobrouter.store.rows import attempt_from_row, dumps, job_from_row
from jobrouter.store.spend import NOTHING_SENT, Actual, settle_in

Queries = Mapping[str, str]


async def lock_job(q: Queries, tx: Tx, job_id: str) -> Job:
    row = await tx.fetchone(q["lock_job"], {"id": job_id})
    if row is None:
        raise JobNotFound(job_id)
    return job_from_row(row)


async def lock_attempt(q: Queries, tx: Tx, attempt_id: str) -> tuple[Job, Attempt]:
    """The attempt's job, locked, and the attempt as it is under that lock. Every change of
    an attempt's state holds its job's lock, so the attempt cannot change after this read;
    one read before the lock could be stale (a sweeper of another process, or the late
    answer of a worker thought dead, changed it meanwhile)."""
    row = await tx.fetchone(q["lock_job_of_attempt"], {"attempt_id": attempt_id})
    if row is None:
        raise AttemptNotFound(attempt_id)
    return job_from_row(row), await read_attempt(q, tx, attempt_id)


async def read_attempt(q: Queries, tx: Tx, attempt_id: str) -> Attempt:
    row = await tx.fetchone(q["get_attempt"], {"id": attempt_id})
    if row is None:
        raise AttemptNotFound(attempt_id)
    return attempt_from_row(row)


async def refuse_if_open(q: Queries, tx: Tx, job_id: str) -> None:
    open_rows = await tx.fetchall(q["open_attempts_of_job"], {"job_id": job_id})
    if open_rows:
        first = attempt_from_row(open_rows[0])
        raise InvalidTransition(
            entity="job",
            entity_id=job_id,
            src=f"attempt {first.id} {first.state}",
            dst="new attempt",
            why="an exclusive task waits until that attempt is resolved",
        )


def moved(job_id: str, src: JobState, dst: JobState) -> JobState:
    """`dst`, when the transition table lets a job move there from `src`."""
    if not job_can_move(src, dst):
        raise InvalidTransition(entity="job", entity_id=job_id, src=src, dst=dst)
    return dst


def started_event(attempt: Attempt) -> NewEvent:
    return NewEvent(
        kind=EventKind.ATTEMPT_STARTED,
        data={"attempt_id": attempt.id, "provider": attempt.provider, "seq": attempt.seq},
    )


async def move_job(
    q: Queries,
    tx: Tx,
    job: Job,
    dst: JobState,
    *,
    now: float,
    error: str | None = None,
    error_detail: str | None = None,
    events: Sequence[NewEvent] = (),
) -> Job:
    """Move the locked `job` to `dst` with `events` (recorded with `dst`): the update numbers
    them, so they cost one insert, not a bump of the job's event_seq as well."""
    moved(job.id, job.state, dst)
    row = await tx.fetchone(
        q["update_job_state"],
        {
            "id": job.id,
            "version": job.version,
            "state": dst,
            "error": error,
            "now": now,
            "error_detail": error_detail,
            "next_run_at": now,
            "events": len(events),
        },
    )
    if row is None:
        raise InvalidTransition(
            entity="job",
            entity_id=job.id,
            src=job.state,
            dst=dst,
            why=f"version {job.version} is no longer current",
        )
    await insert_numbered(q, tx, job.id, dst, events, int(row["event_seq"]), now)
    return job_from_row(row)


async def reopen_in(q: Queries, tx: Tx, job: Job, data: Mapping[str, Any], now: float) -> Job:
    """The locked `unknown` job back to running, due now and unclaimed: the policy decides
    again after an operator resolved an attempt (`data`: the `job.reopened` event's)."""
    reopened = NewEvent(kind=EventKind.JOB_REOPENED, data=dict(data))
    job = await move_job(q, tx, job, JobState.RUNNING, now=now, events=[reopened])
    await tx.execute(q["clear_claim"], {"id": job.id, "next_run_at": now})
    return job


# why an attempt ended with an unknown cost when its end says nothing of its use
NO_USAGE_RECORDED = "no usage recorded: the attempt ended without a reported usage"


def kept_usage(usage: AttemptUsage, attempt: Attempt) -> AttemptUsage:
    """What the end records of the attempt's use: `usage`, unless it reports none and the
    attempt had some (an answer kept on an `unknown` attempt, then resolved by an operator):
    what a call used is not undone by saying what became of it."""
    if usage.prompt_tokens is not None or usage.cost_usd is not None:
        return usage
    if attempt.prompt_tokens is None and attempt.cost_usd is None:
        return usage
    return usage.model_copy(
        update={
            "prompt_tokens": attempt.prompt_tokens,
            "completion_tokens": attempt.completion_tokens,
            "cost_usd": attempt.cost_usd,
            "cost_source": attempt.cost_source,
            "cost_unknown": attempt.cost_unknown,
        }
    )


def cost_unknown(usage: AttemptUsage, attempt: Attempt) -> str | None:
    """Why the cost of the attempt ending with `usage` is unknown (None: it is known): an
    unknown cost always carries its reason, the end's own, else the one the attempt had."""
    if usage.cost_usd is not None:
        return None
    return usage.cost_unknown or attempt.cost_unknown or NO_USAGE_RECORDED


async def end_attempt(
    q: Queries,
    tx: Tx,
    attempt: Attempt,
    dst: AttemptState,
    usage: AttemptUsage,
    now: float,
    error_kind: EndReason | None = None,
    error: str | None = None,
    output: Any = None,
    error_detail: str | None = None,
    verdict: LiveVerdict | None = None,
) -> Attempt:
    """The attempt's end, through the transition table; `verdict`, an answer's, in the same
    UPDATE (no statement of its own: router/store/live_watch.py). `error_kind` is one of the
    closed vocabulary (`EndReason`): any other string is refused before anything is written."""
    reason = None if error_kind is None else EndReason(error_kind)
    if not attempt_can_move(attempt.state, dst):
        raise InvalidTransition(entity="attempt", entity_id=attempt.id, src=attempt.state, dst=dst)
    usage = kept_usage(usage, attempt)
    row = await tx.fetchone(
        q["finish_attempt"],
        {
            "id": attempt.id,
            "from_state": attempt.state,
            "state": dst,
            "error_kind": reason,
            "error": error,
            "error_detail": error_detail,
            "output": dumps(output),
            "now": now,
            "latency_ms": usage.latency_ms,
            "model": usage.model,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cost_usd": usage.cost_usd,
            "cost_source": usage.cost_source,
            "cost_unknown": cost_unknown(usage, attempt),
            **verdict_columns(verdict, now),
        },
    )
    if row is None:
        raise InvalidTransition(
            entity="attempt",
            entity_id=attempt.id,
            src=attempt.state,
            dst=dst,
            why="it changed under us",
        )
    if row["held"]:  # no statement of its own for an attempt without a reservation
        actual = settled_at(usage, reason)
        if actual is not None:
            await settle_in(q, tx, attempt.id, actual)
    return attempt_from_row(row)


def settled_at(usage: AttemptUsage, error_kind: EndReason | None) -> Actual | None:
    """What an ending attempt's reservation becomes (docs/spend.md, "Every end settles what
    its attempt holds"): nothing when nothing was sent (`not_sent`: the provider provably did
    not act); its reported tokens and cost when it has them; else None, the reservation stays
    charged (an `unknown` attempt, an answer with no usage: the provider may have billed)."""
    if error_kind is EndReason.NOT_SENT:
        return NOTHING_SENT
    if usage.prompt_tokens is None or usage.completion_tokens is None:
        return None
    return Actual(usage.cost_usd, usage.prompt_tokens + usage.completion_tokens)


async def append_events(
    q: Queries, tx: Tx, job_id: str, job_state: JobState, events: Iterable[NewEvent], now: float
) -> None:
    batch = list(events)
    if not batch:
        return
    row = await tx.fetchone(q["bump_event_seq"], {"id": job_id, "n": len(batch)})
    assert row is not None
    await insert_numbered(q, tx, job_id, job_state, batch, int(row["event_seq"]), now)


def event_numbers(event_seq: int, n: int) -> range:
    """The numbers of a job's last `n` events, `event_seq` being the job's as it counts them:
    every writer of events numbers them here (a write bumps the job's `event_seq` first, then
    inserts the events it counted)."""
    return range(event_seq - n + 1, event_seq + 1)


async def insert_numbered(
    q: Queries,
    tx: Tx,
    job_id: str,
    job_state: JobState,
    events: Sequence[NewEvent],
    event_seq: int,
    now: float,
) -> None:
    """Insert `events`, already counted in the job's `event_seq` (as it is now): they are its
    last numbers."""
    if events:
        seqs = event_numbers(event_seq, len(events))
        rows = [(job_id, seq, event, job_state) for seq, event in zip(seqs, events, strict=True)]
        await insert_events_of_jobs(q, tx, rows, now)


async def insert_events_of_jobs(
    q: Queries, tx: Tx, rows: Sequence[tuple[str, int, NewEvent, JobState]], now: float
) -> None:
    """Events of one job or several, each (job id, seq, event, the job's state it records),
    numbered by their writer: ONE statement (`insert_job_events`, its rows one JSON parameter:
    the same text for any number, no parameter limit)."""
    values = [
        {
            "job_id": job_id,
            "seq": seq,
            "kind": event.kind,
            "job_state": state,
            "data": dumps(event.data),
        }
        for job_id, seq, event, state in rows
    ]
    await tx.execute(q["insert_job_events"], {"rows": json.dumps(values), "at": now})


async def write_outbox(q: Queries, tx: Tx, job: Job, now: float, written: OutboxWritten) -> None:
    """The outbox row of a terminal change, in its transaction (I8); `written` tells this
    process's deliverers once it commits."""
    kind = EventKind.job_moved(job.state)
    payload = {
        "event": kind,
        "job_id": job.id,
        "owner": job.owner,
        "idempotency_key": job.idempotency_key,
        "task": job.task,
        "state": job.state,
        "result": job.result,
        "error": job.error,
        "version": job.version,
    }
    await tx.execute(
        q["insert_outbox"],
        {
            "id": new_id(),
            "job_id": job.id,
            "owner": job.owner,
            "kind": kind,
            "payload": dumps(payload),
            "now": now,
        },
    )
    written.outbox_in(tx, job.owner)
