"""OTLP export against an in-process OTLP/HTTP receiver: a router process with
`JOBROUTER_OTLP_ENDPOINT` set runs a job and closes; the receiver decodes what arrived at
/v1/traces and /v1/metrics with opentelemetry-proto. (A subprocess, because the OpenTelemetry
providers are process-wide and can be installed only once.)"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import asyncio, sys
from jobrouter import Router
from jobrouter.config import EngineConfig, RouterConfig, TaskConfig
from tests.support.fakes import FakeProvider

async def main() -> None:
    config = RouterConfig(tasks={"echo": TaskConfig(providers=["fast"], side_effects="none",
                                                    certification="none")},
                          engine=EngineConfig(poll_interval=0.05))
    async with Router.open(sys.argv[1], config, providers={"fast": FakeProvider("fast")}) as r:
        job = await r.submit("shop", "k1", "echo", {"text": "hi"})
        job = await r.wait(job.id, timeout=30)
        print(job.state, flush=True)

asyncio.run(main())
"""


class Received:
    def __init__(self) -> None:
        self.spans: list[tuple[str, dict[str, str]]] = []
        self.metrics: dict[str, list[dict[str, str]]] = {}
        self.service_names: set[str] = set()
        self.paths: list[str] = []


def record_traces(received: Received, body: bytes) -> None:
    request = ExportTraceServiceRequest.FromString(body)
    for resource_spans in request.resource_spans:
        received.service_names.update(service_names(resource_spans.resource.attributes))
        for scope in resource_spans.scope_spans:
            received.spans.extend(
                (span.name, {a.key: a.value.string_value for a in span.attributes})
                for span in scope.spans
            )


def record_metrics(received: Received, body: bytes) -> None:
    request = ExportMetricsServiceRequest.FromString(body)
    for resource_metrics in request.resource_metrics:
        received.service_names.update(service_names(resource_metrics.resource.attributes))
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                points = getattr(metric, kind).data_points if kind else []
                received.metrics.setdefault(metric.name, []).extend(
                    {a.key: a.value.string_value for a in point.attributes} for point in points
                )


def service_names(attributes: Iterable[Any]) -> set[str]:
    return {a.value.string_value for a in attributes if a.key == "service.name"}


def handler_for(received: Received) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.paths.append(self.path)
            if self.path == "/v1/traces":
                record_traces(received, body)
            elif self.path == "/v1/metrics":
                record_metrics(received, body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    return Handler


@pytest.fixture
def receiver() -> Iterator[tuple[str, Received]]:
    received = Received()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(received))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()


def test_traces_and_metrics_reach_the_otlp_endpoint(
    receiver: tuple[str, Received], tmp_path: Path
) -> None:
    endpoint, received = receiver
    env = {**os.environ, "JOBROUTER_OTLP_ENDPOINT": endpoint}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, f"sqlite:///{tmp_path / 'jobs.db'}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "succeeded"
    # Closing the router flushed both exports before the process ended: they are here.
    names = [name for name, _ in received.spans]
    assert "jobrouter.job" in names and "jobrouter.attempt" in names, received.paths
    attempt = next(attrs for name, attrs in received.spans if name == "jobrouter.attempt")
    assert attempt["attempt.provider"] == "fast"
    assert received.service_names == {"jobrouter"}
    assert {"provider": "fast", "outcome": "succeeded"} in received.metrics["jobrouter_attempts"]
    assert "jobrouter_attempt_duration_seconds_bucket" in received.metrics
    buckets = received.metrics["jobrouter_attempt_duration_seconds_bucket"]
    assert any(point.get("le") == "+Inf" for point in buckets)
    assert "jobrouter_leader" in received.metrics
