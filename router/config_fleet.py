"""Configuration of a fleet of routers: `[delivery]` (the optional NATS bus), `[leader]` (who
runs the periodic work) and `[telemetry]` (OTLP export). Kept apart from config.py, which
`RouterConfig` imports them into. Each URL may also come from the environment, which wins over
the file (a deployment sets it per machine): `JOBROUTER_NATS_URL`, `JOBROUTER_OTLP_ENDPOINT`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

NATS_URL_ENV = "JOBROUTER_NATS_URL"
OTLP_ENDPOINT_ENV = "JOBROUTER_OTLP_ENDPOINT"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeliveryConfig(_Strict):
    """`nats_url` moves webhook delivery onto a JetStream stream (docs/operations.md)."""

    nats_url: str | None = Field(default=None, description="nats://host:port; unset: database")
    stream: str = Field(
        default="JOBROUTER_EVENTS",
        pattern=r"^[A-Za-z0-9_-]+$",
        description="the JetStream stream, made if missing (work queue)",
    )
    subject: str = Field(
        default="jobrouter.events",
        pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$",
        description="the subject events are published on",
    )
    consumer: str = Field(
        default="jobrouter-webhooks",
        pattern=r"^[A-Za-z0-9_-]+$",
        description="the durable pull consumer every process shares",
    )
    dedupe_window: float = Field(
        default=120.0, gt=0, description="seconds JetStream remembers a message id"
    )
    ack_wait: float | None = Field(
        default=None,
        gt=0,
        description="seconds before an unacked message is redelivered; default timeout + 30",
    )

    @field_validator("nats_url")
    @classmethod
    def _nats_url(cls, value: str | None) -> str | None:
        if value is not None:
            check_nats_url(value)
        return value

    def resolved_nats_url(self, environ: Mapping[str, str] | None = None) -> str | None:
        env = os.environ if environ is None else environ
        url = env.get(NATS_URL_ENV) or self.nats_url
        if url:
            check_nats_url(url)
        return url or None


class LeaderConfig(_Strict):
    heartbeat: float = Field(
        default=2.0,
        gt=0,
        description="seconds between a follower's tries of the lock; the leader's lease lasts 1.5 "
        "heartbeats, renewed every half",
    )


class TelemetryConfig(_Strict):
    """OTLP/HTTP export of traces and metrics, with `pip install 'jobrouter[otel]'`."""

    otlp_endpoint: str | None = Field(default=None, description="http(s)://collector:4318")
    service_name: str = Field(default="jobrouter", description="the resource's service.name")
    export_interval: float = Field(default=15.0, gt=0, description="seconds between metric exports")

    def resolved_endpoint(self, environ: Mapping[str, str] | None = None) -> str | None:
        env = os.environ if environ is None else environ
        return env.get(OTLP_ENDPOINT_ENV) or self.otlp_endpoint or None


def check_nats_url(value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in ("nats", "tls") or not parts.hostname:
        raise ValueError(f"must be a nats:// or tls:// URL with a host, got {value!r}")
