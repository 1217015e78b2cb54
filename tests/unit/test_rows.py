"""Rows to models without validation (router/store/rows.py): the instance `_trusted` builds is
the one `model_construct` builds, and the validated model equals it."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import ValidationError

from jobrouter.models import Attempt, Job
from jobrouter.store.rows import attempt_from_row, job_from_row

NOW = time.time()
JOB_ROW = {
    "id": "a" * 32,
    "owner": "shop",
    "idempotency_key": "k-1",
    "fingerprint": "f" * 64,
    "task": "caption",
    "input": json.dumps({"product": {"name": "tea"}}),
    "params": "{}",
    "state": "succeeded",
    "version": 3,
    "winner_attempt_id": "b" * 32,
    "result": json.dumps({"text": "Tea."}),
    "error": None,
    "error_detail": None,
    "created_at": NOW,
    "updated_at": NOW + 1,
    "deadline_at": None,
}
ATTEMPT_ROW = {
    "id": "b" * 32,
    "job_id": "a" * 32,
    "seq": 1,
    "provider": "primary",
    "model": "openai/stub",
    "state": "succeeded",
    "error_kind": None,
    "error": None,
    "error_detail": None,
    "output": json.dumps({"text": "Tea."}),
    "started_at": NOW,
    "finished_at": NOW + 1,
    "latency_ms": 12.5,
    "prompt_tokens": 40,
    "completion_tokens": 5,
    "cost_usd": None,
    "cost_source": None,
    "cost_unknown": "the provider reported no token usage",
    "worker": "host:1:abc",
    "lease_until": None,
    "resolved_by": None,
    "resolution_note": None,
}


def _same(built: Job | Attempt, constructed: Job | Attempt) -> None:
    assert type(built) is type(constructed)
    assert built.__dict__ == constructed.__dict__
    assert built.model_fields_set == constructed.model_fields_set
    assert built.__pydantic_extra__ is None and built.__pydantic_private__ is None
    assert built == constructed
    assert built.model_dump(mode="json") == constructed.model_dump(mode="json")


def test_a_job_row_builds_the_model_construct_would() -> None:
    job = job_from_row(JOB_ROW, created=True)
    _same(job, Job.model_construct(**job.__dict__))
    assert Job.model_validate(job.__dict__) == job  # and it is a valid job
    assert job.created and "created" not in job.model_dump()
    with pytest.raises(ValidationError):  # still frozen
        job.state = "failed"  # type: ignore[misc]


def test_an_attempt_row_builds_the_model_construct_would() -> None:
    attempt = attempt_from_row(ATTEMPT_ROW)
    _same(attempt, Attempt.model_construct(**attempt.__dict__))
    assert Attempt.model_validate(attempt.__dict__) == attempt
