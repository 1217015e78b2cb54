"""The event stream: every event exactly once and in order, whether one subscribes before the
job finished, after it, or reconnects in the middle with Last-Event-ID; the stream ends after
the settling event and only then."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator
from pathlib import Path

import httpx
import pytest

from jobrouter.client import JobClient, JobIntent, RetryPolicy
from jobrouter.models import JobEvent
from jobrouter.states import JobState
from tests.acceptance.conftest import Server


@pytest.fixture(scope="module")
def token(server: Server) -> str:
    return server.token("watcher")


async def sse(
    http: httpx.AsyncClient, job_id: str, token: str, last_event_id: int | None = None
) -> AsyncGenerator[JobEvent | None, None]:
    """Raw SSE: None for each comment line (heartbeats), then each event."""
    headers = {"Authorization": f"Bearer {token}"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    async with http.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line.startswith(":"):
                yield None
            elif line:
                name, _, value = line.partition(": ")
                fields[name] = value
            elif "data" in fields:
                event = JobEvent.model_validate(json.loads(fields["data"]))
                assert fields["id"] == str(event.seq) and fields["event"] == event.kind
                yield event
                fields = {}


def check_log(events: list[JobEvent]) -> None:
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    assert events[0].kind == "job.queued"
    settled = [
        event for event in events if event.kind.startswith("job.") and event.job_state.settled
    ]
    assert settled == [events[-1]], "the stream must end on the settling event, and only there"


async def test_before_middle_and_after_completion_see_the_same_log(
    server: Server, token: str
) -> None:
    async with (
        JobClient(server.url, token, retry=RetryPolicy(initial=0.02)) as jobs,
        httpx.AsyncClient(base_url=server.url, timeout=10) as http,
    ):
        job = await jobs.submit(JobIntent("slow", {"text": "watch"}))

        # Subscribed before completion: heartbeats while the slow provider works.
        before: list[JobEvent] = []
        comments = 0
        async for event in sse(http, job.id, token):
            if event is None:
                comments += 1
            else:
                before.append(event)
        check_log(before)
        assert before[-1].kind == "job.succeeded"
        assert comments >= 2  # heartbeat every 0.2 s during the 0.8 s call

        # Subscribed after completion: the whole log again, then the end.
        after = [event async for event in sse(http, job.id, token) if event is not None]
        assert after == before

        # Reconnect in the middle with Last-Event-ID: the rest, nothing twice.
        head: list[JobEvent] = []
        async with contextlib.aclosing(sse(http, job.id, token)) as stream:
            async for event in stream:
                if event is not None:
                    head.append(event)
                if len(head) == 2:
                    break
        tail = [
            event async for event in sse(http, job.id, token, last_event_id=2) if event is not None
        ]
        assert head + tail == before


async def test_reconnect_while_running_loses_and_repeats_nothing(
    server: Server, token: str, tmp_path: Path
) -> None:
    gate = tmp_path / "answer-now"  # the provider answers once this file exists
    async with (
        JobClient(server.url, token, retry=RetryPolicy(initial=0.02)) as jobs,
        httpx.AsyncClient(base_url=server.url, timeout=10) as http,
    ):
        job = await jobs.submit(JobIntent("gate", {"text": str(gate)}))
        head: list[JobEvent] = []
        async with contextlib.aclosing(sse(http, job.id, token)) as stream:
            async for event in stream:
                if event is not None:
                    head.append(event)
                    if event.kind == "attempt.started":
                        break  # drop the connection while the attempt runs
        assert (await jobs.get(job.id)).state is JobState.RUNNING  # cut before the end
        gate.touch()
        tail = [
            event async for event in sse(http, job.id, token, head[-1].seq) if event is not None
        ]
        check_log(head + tail)
        assert tail[-1].kind == "job.succeeded"
        # The client does the same by itself, from any point.
        resumed = [event async for event in jobs.events(job.id, after=1)]
        assert resumed == (head + tail)[1:]


async def test_stream_of_a_job_needing_attention_ends_there(server: Server, token: str) -> None:
    async with JobClient(server.url, token, retry=RetryPolicy(initial=0.02)) as jobs:
        job = await jobs.submit(JobIntent("hang", {"text": "unknown"}))
        events = [event async for event in jobs.events(job.id)]
    check_log(events)
    assert events[-1].kind == "job.unknown"
    assert any(event.kind == "attempt.unknown" for event in events)
