"""The pieces of a job's path that issue 28 cut, each timed alone: CPU microseconds per call,
`--calls` calls in a loop, on the benchmark's contract (tests/bench/bench_contract.yaml).

    python -m tests.bench.hot_calls
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from jobrouter import tracing
from jobrouter.contracts import (
    build_request,
    load_contract,
    run_checks,
    validate_input,
    validate_output,
)
from jobrouter.models import Attempt, canonical_json, payload_fingerprint
from jobrouter.providers import structured
from jobrouter.store.rows import attempt_from_row, job_from_row
from tests.bench.scenarios import BENCH_CONTRACT

INPUT = {"product": {"name": "Saffron tea 12"}, "tone": "warm"}
OUTPUT = {"text": "Warm saffron tea for cold evenings."}
NOW = time.time()
JOB_ROW = {
    **dict.fromkeys(("winner_attempt_id", "result", "error", "error_detail")),
    "id": "a" * 32,
    "owner": "bench",
    "idempotency_key": "k-1",
    "fingerprint": "f" * 64,
    "task": "bench",
    "input": json.dumps(INPUT),
    "params": "{}",
    "state": "running",
    "version": 2,
    "created_at": NOW,
    "updated_at": NOW,
    "deadline_at": NOW + 60,
}
ATTEMPT_ROW = {
    **dict.fromkeys(
        (
            "error_kind",
            "error",
            "error_detail",
            "output",
            "finished_at",
            "latency_ms",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "cost_source",
            "cost_unknown",
            "resolved_by",
            "resolution_note",
        )
    ),
    "id": "b" * 32,
    "job_id": "a" * 32,
    "seq": 1,
    "provider": "stub",
    "model": "openai/stub",
    "state": "started",
    "started_at": NOW,
    "worker": "bench",
    "lease_until": NOW + 30,
}


def cpu_us(call: Callable[[], Any], calls: int) -> float:
    call()
    began = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - began) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    contract = load_contract(str(BENCH_CONTRACT))
    job = job_from_row(JOB_ROW)
    attempt: Attempt = attempt_from_row(ATTEMPT_ROW)
    answer = json.dumps(OUTPUT)

    def job_span() -> None:
        with tracing.job_span(job):
            pass

    def attempt_span() -> None:
        with tracing.attempt_span(attempt) as span:
            tracing.finish_attempt(span, attempt)

    pieces: dict[str, Callable[[], Any]] = {
        "validate_input": lambda: validate_input(contract, INPUT),
        "validate_output": lambda: validate_output(contract, OUTPUT),
        "run_checks": lambda: run_checks(contract.checks, OUTPUT),
        "build_request (render)": lambda: build_request(contract, INPUT, labels={"task": "b"}),
        "provider's parse_output": lambda: structured.parse_output(
            answer, contract.output_schema, provider="stub"
        ),
        "canonical_json(input)": lambda: canonical_json(INPUT),
        "payload_fingerprint": lambda: payload_fingerprint("bench", INPUT, {}),
        "job_from_row": lambda: job_from_row(JOB_ROW),
        "attempt_from_row": lambda: attempt_from_row(ATTEMPT_ROW),
        "tracing.job_span": job_span,
        "tracing.attempt_span": attempt_span,
    }
    for name, call in pieces.items():
        print(f"{name:28s} {cpu_us(call, args.calls):8.1f} us")


if __name__ == "__main__":
    main()
