"""Rows to values and back: epoch seconds <-> aware datetimes, JSON text <-> Python.

Jobs and attempts are built without validation: a row of our own schema, converted field by
field here, needs no second check (measured: validation was about 3 of the 10 us a job row
costs, and a job reads five job rows and three attempt rows). Not even through
`model_construct`, which walks every field's aliases and defaults for values that are all
given: `_trusted` sets what it would set (measured with issue 28: a third of a row's cost).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from jobrouter.errors import StoreError
from jobrouter.models import Attempt, Job, JobEvent, canonical_json
from jobrouter.states import AttemptState, EndReason, JobState
from jobrouter.store.connector import Row

M = TypeVar("M", bound=BaseModel)
_set = object.__setattr__  # the models are frozen: their own __setattr__ refuses


def _trusted(cls: type[M], values: dict[str, Any]) -> M:
    """`cls.model_construct(**values)` for `values` that name every field: the same instance
    (`__dict__`, fields set, no extra, no private attributes), without the walk over the
    fields. Anything else (a field missing, a model with a post-init hook) goes through
    `model_construct`."""
    if len(values) != len(cls.__pydantic_fields__) or cls.__pydantic_post_init__:
        return cls.model_construct(**values)
    model = cls.__new__(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", set(values))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


def ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def at(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def dumps(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def end_reason(attempt_id: str, value: str | None) -> EndReason | None:
    """An attempt row's `error_kind`, one of the closed vocabulary; a value this version does not
    know (written by another version, or by hand) is refused, never passed on as a string."""
    if value is None:
        return None
    try:
        return EndReason(value)
    except ValueError:
        known = ", ".join(EndReason)
        raise StoreError(
            f"attempt {attempt_id} has error_kind {value!r}, which this version of jobrouter "
            f"does not know (one of: {known}); was the row written by another version?",
            transient=False,
        ) from None


def job_from_row(row: Row, *, created: bool = False) -> Job:
    return _trusted(
        Job,
        dict(
            id=row["id"],
            owner=row["owner"],
            idempotency_key=row["idempotency_key"],
            fingerprint=row["fingerprint"],
            task=row["task"],
            input=json.loads(row["input"]),
            params=json.loads(row["params"]),
            state=JobState(row["state"]),
            version=row["version"],
            winner_attempt_id=row["winner_attempt_id"],
            result=loads(row["result"]),
            error=row["error"],
            error_detail=row["error_detail"],
            created_at=at(row["created_at"]),
            updated_at=at(row["updated_at"]),
            deadline_at=ts(row["deadline_at"]),
            created=created,
        ),
    )


def attempt_from_row(row: Row) -> Attempt:
    return _trusted(
        Attempt,
        dict(
            id=row["id"],
            job_id=row["job_id"],
            seq=row["seq"],
            provider=row["provider"],
            model=row["model"],
            state=AttemptState(row["state"]),
            error_kind=end_reason(row["id"], row["error_kind"]),
            error=row["error"],
            error_detail=row["error_detail"],
            output=loads(row["output"]),
            started_at=at(row["started_at"]),
            finished_at=ts(row["finished_at"]),
            latency_ms=row["latency_ms"],
            prompt_tokens=row["prompt_tokens"],
            completion_tokens=row["completion_tokens"],
            cost_usd=row["cost_usd"],
            cost_source=row["cost_source"],
            cost_unknown=row["cost_unknown"],
            worker=row["worker"],
            lease_until=ts(row["lease_until"]),
            resolved_by=row["resolved_by"],
            resolution_note=row["resolution_note"],
        ),
    )


def event_from_row(row: Row) -> JobEvent:
    return JobEvent(
        job_id=row["job_id"],
        seq=row["seq"],
        kind=row["kind"],
        job_state=JobState(row["job_state"]),
        data=json.loads(row["data"]),
        at=at(row["at"]),
    )
