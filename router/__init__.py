"""jobrouter's router: durable jobs, attempts, the engine, stores, HTTP API, client and CLI."""

from router.api import Router
from router.errors import (
    AttemptNotFound,
    ConfigError,
    IdempotencyConflict,
    InvalidTransition,
    JobNotFound,
    JobRouterError,
    NoEligibleProvider,
    RouterClosed,
    StoreError,
)
from router.models import Attempt, Job, JobEvent
from router.states import AttemptState, JobState

__all__ = [
    "Attempt",
    "AttemptNotFound",
    "AttemptState",
    "ConfigError",
    "IdempotencyConflict",
    "InvalidTransition",
    "Job",
    "JobEvent",
    "JobNotFound",
    "JobRouterError",
    "JobState",
    "NoEligibleProvider",
    "Router",
    "RouterClosed",
    "StoreError",
]
