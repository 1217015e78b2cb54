"""OTLP/HTTP export of traces and metrics when `[telemetry] otlp_endpoint` (or
`JOBROUTER_OTLP_ENDPOINT`) is set; needs `pip install 'jobrouter[otel]'`. Without the setting
nothing here imports OpenTelemetry.

Traces: the spans of router/tracing.py (`jobrouter.job`, `jobrouter.attempt`) go to
`<endpoint>/v1/traces` through a batch span processor.

Metrics: the router's metrics live in one prometheus_client registry (router/metrics.py, served
at /metrics). Rather than count everything twice, each of its metric families is mirrored by an
observable OpenTelemetry instrument that reads the registry at every export (OpenTelemetry has
no bridge from prometheus_client; this one is ~40 lines), sent to `<endpoint>/v1/metrics` every
`export_interval` seconds. Names, as instruments:

    counter   <name>            (Prometheus shows <name>_total)      observable counter
    gauge     <name>                                                 observable gauge
    enum      <name>            attribute <name>=<state>, value 1    observable gauge
    histogram <name>_bucket     attribute le; <name>_sum, <name>_count  observable counters

The process-wide providers are installed by the first `Router.open` that asks for them and shut
down (flushed) when the last such router closes.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from jobrouter.config_fleet import TelemetryConfig
from jobrouter.errors import ConfigError

if TYPE_CHECKING:  # the registry is read only when exporting: a quick CLI command never does
    from prometheus_client import CollectorRegistry

log = logging.getLogger("jobrouter.telemetry")
_COUNTER_LIKE = {"counter"}
_HISTOGRAM_PARTS = ("_bucket", "_sum", "_count")


class Telemetry:
    """The installed tracer and meter providers; `shutdown` flushes what is pending."""

    def __init__(self, tracer_provider: Any, meter_provider: Any, names: list[str]) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.instrument_names = names

    def shutdown(self) -> None:
        self.tracer_provider.force_flush()
        self.meter_provider.force_flush()
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


_installed: Telemetry | None = None
_users = 0


def acquire(config: TelemetryConfig) -> bool:
    """Install the OTLP export once per process when an endpoint is configured. True when
    this caller must `release()` it."""
    global _installed, _users
    endpoint = config.resolved_endpoint()
    if endpoint is None:
        return False
    if _installed is None:
        _installed = install(endpoint.rstrip("/"), config)
    _users += 1
    return True


def release() -> None:
    global _installed, _users
    _users -= 1
    if _users == 0 and _installed is not None:
        installed, _installed = _installed, None
        installed.shutdown()


def install(
    endpoint: str, config: TelemetryConfig, registry: CollectorRegistry | None = None
) -> Telemetry:
    """Install the export to `endpoint` of `registry` (default: the router's, router/metrics.py)."""
    if registry is None:
        from jobrouter.metrics import REGISTRY

        registry = REGISTRY
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ConfigError(
            "OTLP export needs the extra: pip install 'jobrouter[otel]'",
            key="telemetry.otlp_endpoint",
        ) from exc
    # service.instance.id tells the processes apart (Prometheus shows it as `instance`)
    resource = Resource.create(
        {
            "service.name": config.service_name,
            "service.instance.id": f"{socket.gethostname()}:{os.getpid()}",
        }
    )
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
    )
    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics"),
        export_interval_millis=config.export_interval * 1000,
    )
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    names = mirror_registry(meter_provider.get_meter("jobrouter"), registry)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    log.info(
        "OTLP export to %s: traces, and %d metrics every %.0fs",
        endpoint,
        len(names),
        config.export_interval,
    )
    return Telemetry(tracer_provider, meter_provider, names)


def mirror_registry(meter: Any, registry: CollectorRegistry) -> list[str]:
    """One observable instrument per series name of the registry; returns their names."""
    from opentelemetry.metrics import CallbackOptions, Observation

    names = []
    for family in registry.collect():
        for name, counter in instruments_of(family.name, family.type):

            def observe(options: CallbackOptions, name: str = name) -> Iterator[Observation]:
                for labels, value in samples(registry, name):
                    yield Observation(value, labels)

            if counter:
                meter.create_observable_counter(
                    name, callbacks=[observe], description=family.documentation
                )
            else:
                meter.create_observable_gauge(
                    name, callbacks=[observe], description=family.documentation
                )
            names.append(name)
    return names


def instruments_of(name: str, kind: str) -> list[tuple[str, bool]]:
    """(instrument name, is a counter) for one Prometheus metric family."""
    if kind == "histogram":
        return [(name + part, True) for part in _HISTOGRAM_PARTS]
    return [(name, kind in _COUNTER_LIKE)]


def samples(registry: CollectorRegistry, name: str) -> Iterable[tuple[dict[str, str], float]]:
    """The current values of one instrument's series, read from the registry."""
    for family in registry.collect():
        for sample in family.samples:
            if sample_instrument(family.name, family.type, sample.name) == name:
                yield dict(sample.labels), float(sample.value)


def sample_instrument(family: str, kind: str, sample: str) -> str | None:
    """Which instrument a Prometheus sample feeds (None: `_created` timestamps and the like)."""
    if kind == "counter":
        return family if sample == family + "_total" else None
    if kind == "histogram":
        return sample if sample in {family + part for part in _HISTOGRAM_PARTS} else None
    return family if sample == family else None
