"""With an OpenTelemetry SDK configured, each job and each attempt (hedges included) is a span,
attempts nested in their job, carrying provider and final state."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobrouter import Router
from jobrouter.config import RouterConfig, TaskConfig
from jobrouter.states import AttemptState
from tests.support.fakes import FakeProvider, Step
from tests.support.waiting import until

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _sdk() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)  # once per process: the global provider


async def both_recorded(router: Router, job_id: str) -> bool:
    states = {attempt.state for attempt in await router.attempts(job_id)}
    return states == {AttemptState.SUCCEEDED, AttemptState.CANCELLED}


async def test_a_hedged_job_is_one_job_span_with_two_attempt_spans(tmp_path: Path) -> None:
    EXPORTER.clear()
    config = RouterConfig(
        tasks={
            "t": TaskConfig(
                providers=["slow", "fast"],
                side_effects="none",
                hedge_after=0.1,
                certification="none",
            )
        }
    )
    slow = FakeProvider("slow", default=Step(hang=True))  # the hedge wins, always
    fast = FakeProvider("fast", default=Step(output={"text": "first"}))
    async with Router.open(
        f"sqlite:///{tmp_path}/t.db", config, providers={"slow": slow, "fast": fast}
    ) as router:
        job = await router.submit("o", "k", "t", {"x": 1})
        job = await router.wait(job.id, 60)
        # The hedge loser's span ends when its cancellation is recorded: wait for that row.
        await until(lambda: both_recorded(router, job.id), "both attempts recorded", every=0.01)
    spans = {s.name: [] for s in EXPORTER.get_finished_spans()}
    for s in EXPORTER.get_finished_spans():
        spans[s.name].append(s)
    (job_span,) = spans["jobrouter.job"]
    assert job_span.attributes["job.id"] == job.id
    assert job_span.attributes["job.state"] == "succeeded"
    attempts = {s.attributes["attempt.provider"]: s for s in spans["jobrouter.attempt"]}
    assert set(attempts) == {"slow", "fast"}
    assert attempts["fast"].attributes["attempt.state"] == "succeeded"
    assert attempts["slow"].attributes["attempt.state"] == "cancelled"
    for span in attempts.values():
        assert span.parent is not None and span.parent.span_id == job_span.context.span_id


def test_spans_follow_the_provider_configured_at_the_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No provider configured (OpenTelemetry's proxy): no span is made at all. The provider
    set by the application is used from the next span on."""
    from jobrouter import tracing
    from jobrouter.models import Job

    job = Job.model_construct(id="j", task="t", owner="o")
    configured = trace.get_tracer_provider()
    assert isinstance(configured, TracerProvider)
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    with tracing.job_span(job) as span:
        assert isinstance(span, tracing._NoSpan)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: configured)
    EXPORTER.clear()
    with tracing.job_span(job) as span:
        assert span.is_recording()
    assert [s.name for s in EXPORTER.get_finished_spans()] == ["jobrouter.job"]
