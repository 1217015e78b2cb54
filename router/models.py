"""The router's values: jobs, attempts, events, and the identifiers and fingerprints they carry."""

from __future__ import annotations

import hashlib
import json
import os
import time
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jobrouter.states import AttemptState, EndReason, EventKind, JobState

JsonObject = dict[str, Any]


def new_id() -> str:
    """A time-ordered 128-bit id (UUIDv7 layout, as hex): new rows land at the end of the
    primary-key index, which keeps inserts cheap as the tables grow to millions of rows."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | rand
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    return f"{value:032x}"


# One encoder for the process: `json.dumps` with any non-default option builds a new
# JSONEncoder on every call, about a third of its cost for the small values of a job.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    return _CANONICAL.encode(value)


def payload_fingerprint(task: str, input: JsonObject, params: JsonObject) -> str:
    """What makes two submits "the same intent": sha256 of task + input + params."""
    body = canonical_json({"task": task, "input": input, "params": params})
    return hashlib.sha256(body.encode()).hexdigest()


class Job(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    owner: str
    idempotency_key: str
    fingerprint: str
    task: str
    input: JsonObject
    params: JsonObject
    state: JobState
    version: int
    winner_attempt_id: str | None = None
    result: Any = None
    # `error` is the summary anyone who may see the job is shown: our own words only (what the
    # router concluded, the provider's alias, an HTTP status), never a provider's text.
    # `error_detail` is the raw detail behind it (a provider's words, scrubbed of credentials):
    # operators only; `jobrouter.disclosure.disclose` blanks it for everyone else.
    error: str | None = None
    error_detail: str | None = None
    created_at: datetime
    updated_at: datetime
    deadline_at: datetime | None = None
    # Not stored: True when this call created the job, False when it found it.
    created: bool = Field(default=False, exclude=True)


class Attempt(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    job_id: str
    seq: int
    provider: str
    model: str | None = None
    state: AttemptState
    error_kind: EndReason | None = None  # why it ended so (None: succeeded, lost)
    error: str | None = None  # the summary, our own words (see Job.error)
    error_detail: str | None = None  # the raw detail: operators only (see Job.error)
    output: Any = None
    started_at: datetime
    finished_at: datetime | None = None
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    # where the price came from ('config', 'litellm_map'); why the cost is unknown (cost_usd
    # None: never 0 for unknown); None both for attempts recorded before schema v19
    cost_source: str | None = None
    cost_unknown: str | None = None
    worker: str | None = None
    lease_until: datetime | None = None
    # An operator's resolution of this attempt once `unknown` (router/resolution.py): who
    # (`token:ID`, `user:NAME`) and what they checked; None for an attempt nobody resolved.
    resolved_by: str | None = None
    resolution_note: str | None = None


class JobEvent(BaseModel):
    """One entry of a job's append-only event log; `seq` counts from 1 per job."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    seq: int
    kind: EventKind
    job_state: JobState
    data: JsonObject = Field(
        description="what the event records; an `error` here is the "
        "router's summary, never a provider's words (those are the job's "
        "and attempt's `error_detail`, for operators)"
    )
    at: datetime


class NewEvent(BaseModel):
    """An event to append; the store gives it its `seq` inside the same transaction."""

    model_config = ConfigDict(frozen=True)

    kind: EventKind
    data: JsonObject = Field(default_factory=dict)


class AttemptUsage(BaseModel):
    model_config = ConfigDict(frozen=True)

    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    cost_source: str | None = None
    cost_unknown: str | None = None
    model: str | None = None


class FinishOutcome(BaseModel):
    """What the compare-and-swap decided: `won` is True for exactly one attempt of a job."""

    model_config = ConfigDict(frozen=True)

    won: bool
    job: Job
    attempt: Attempt


class SpendLine(BaseModel):
    """One line of a spend report (`Router.spend`): the attempts of one group (the keys the
    report is grouped by are set, the others None) and what they used. `cost_usd` sums the
    costs known (None: none is known); `cost_unknown` counts the attempts whose cost is
    unknown, which `cost_usd` leaves out: with any, the real spend is more than it says."""

    model_config = ConfigDict(frozen=True)

    owner: str | None = None
    task: str | None = None
    provider: str | None = None
    period: str | None = Field(
        default=None, description="the UTC day (`2026-12-04`) or month (`2026-12`)"
    )
    attempts: int
    tokens: int = Field(description="prompt + completion tokens, as the providers reported")
    cost_usd: float | None = Field(description="the sum of the known costs; null: none known")
    cost_unknown: int = Field(description="attempts whose cost is unknown (not in cost_usd)")


class SpendReport(BaseModel):
    """What the attempts started at `since` <= t < `until` used, grouped `by` (in that
    order), for one `owner` or every owner (None), with the `total` over all lines."""

    model_config = ConfigDict(frozen=True)

    since: datetime
    until: datetime
    by: list[str]
    owner: str | None = None
    lines: list[SpendLine]
    total: SpendLine


class BudgetUse(BaseModel):
    """A configured budget's use in its current period: what the ledger holds charged
    (reservations in flight plus settled actuals, `SpendLedger.charged`), its caps (None: the
    side is uncapped) and what is left under each."""

    model_config = ConfigDict(frozen=True)

    budget: str
    scope: str  # owner, task, provider or global
    covers: str | None = None  # the owner, task or provider it caps (None: global)
    period: str  # day, month (UTC calendar) or rolling
    period_start: datetime
    period_end: datetime
    limit_usd: float | None = None
    limit_tokens: int | None = None
    charged_usd: float
    charged_tokens: int
    remaining_usd: float | None = None
    remaining_tokens: int | None = None


class SpendAnswer(SpendReport):
    """`GET /v1/spend`'s answer (and `JobClient.spend`'s): the report with each budget's use."""

    budgets: list[BudgetUse] = Field(
        description="each budget's use in its current period (an owner's token: its own "
        "owner's budgets only)"
    )
