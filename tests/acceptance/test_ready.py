"""`/health/ready` on the real server started as `jobrouter serve` starts it (listening before
its providers warm up, the workers after): ready means an attempt can start (issue 30). Before,
it said ready while the workers waited on litellm's import (~24 s on a busy machine) and every
job accepted meanwhile sat queued."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.acceptance.conftest import Server, start_server, stop_server, wait_for


def submit(server: Server, token: str, key: str) -> dict[str, Any]:
    answer = httpx.post(
        f"{server.url}/v1/jobs",
        json={"task": "echo", "input": {"text": key}},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key},
        timeout=30,
    )
    assert answer.status_code == 202, answer.text
    job: dict[str, Any] = answer.json()
    return job


def test_ready_only_once_a_submitted_job_is_claimed_at_once(tmp_path: Path) -> None:
    """mutant: the `router.warming_up` check removed from `ready`, seen failing (200 while the
    warm-up held the workers back).

    A job's state in the answer to its POST is the event: a process whose workers run claims
    the job and starts its first attempt in the creating transaction (`running`); one whose
    workers have not started creates it `queued`."""
    gate = tmp_path / "warmed-up"
    server = start_server(
        tmp_path,
        args=["--background"],
        env={"JOBROUTER_TEST_WARM_GATE": str(gate)},
        wait_ready=False,
    )
    try:
        wait_for(server, "/health/live")
        token = server.token("alice")
        assert submit(server, token, "during-warm-up")["state"] == "queued"  # the workers wait
        ready = httpx.get(f"{server.url}/health/ready", timeout=30)
        assert ready.status_code == 503, ready.text
        assert ready.json()["type"].endswith("not-ready")
        assert "warming up" in ready.json()["detail"] and ready.headers["Retry-After"] == "1"
        gate.touch()
        wait_for(server, "/health/ready")
        assert submit(server, token, "after-ready")["state"] in {"running", "succeeded"}
    finally:
        stop_server(server)
