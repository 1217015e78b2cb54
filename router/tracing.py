"""OpenTelemetry spans per job and per attempt, when OpenTelemetry is installed and an SDK is
configured by the application (`pip install 'jobrouter[otel]'`, then set a TracerProvider as
usual). Without the package these are free no-ops; with only the API, spans do not record.

    jobrouter.job        one per job driven by a worker: job.id, job.task, job.owner, job.state
    └── jobrouter.attempt one per attempt (hedges too): attempt.id, attempt.seq,
                          attempt.provider, attempt.state, attempt.error_kind
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jobrouter.models import Attempt, Job

try:  # an optional dependency: the router works the same without it
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised by installs without the extra
    _trace = None  # type: ignore[assignment]


class _NoSpan:
    def set_attribute(self, key: str, value: Any) -> None:
        return None


def _tracer() -> Any:
    """The tracer of the configured provider; None while none is (OpenTelemetry's proxy
    provider: its spans do not record, and making one cost about 15 us a span, two a job).
    A provider set later is seen at the next span; one tracer per provider."""
    if _trace is None:
        return None
    provider = _trace.get_tracer_provider()
    if isinstance(provider, _trace.ProxyTracerProvider):
        return None
    tracer = _TRACERS.get(id(provider))
    if tracer is None or tracer[0] is not provider:
        tracer = _TRACERS[id(provider)] = (provider, provider.get_tracer("jobrouter"))
    return tracer[1]


_TRACERS: dict[int, tuple[Any, Any]] = {}


@contextmanager
def job_span(job: Job) -> Iterator[Any]:
    tracer = _tracer()
    if tracer is None:
        yield _NoSpan()
        return
    with tracer.start_as_current_span(
        "jobrouter.job",
        attributes={
            "job.id": job.id,
            "job.task": job.task,
            "job.owner": job.owner,
        },
    ) as span:
        yield span


@contextmanager
def attempt_span(attempt: Attempt) -> Iterator[Any]:
    tracer = _tracer()
    if tracer is None:
        yield _NoSpan()
        return
    with tracer.start_as_current_span(
        "jobrouter.attempt",
        attributes={
            "attempt.id": attempt.id,
            "attempt.seq": attempt.seq,
            "attempt.provider": attempt.provider,
        },
    ) as span:
        yield span


def finish_attempt(span: Any, attempt: Attempt) -> None:
    span.set_attribute("attempt.state", str(attempt.state))
    if attempt.error_kind:
        span.set_attribute("attempt.error_kind", str(attempt.error_kind))
