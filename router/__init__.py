"""jobrouter: durable AI jobs on several LLM providers, idempotent, with exactly one winner and
failover only to contract-certified providers.

The one import name of the distribution. Its parts: `jobrouter.Router` (the Python door),
`jobrouter.client` (the HTTP client), `jobrouter.providers` (the provider seam and its
transports), `jobrouter.contracts` (contracts and certification). The errors and states are
imported at once (they cost nothing); `Router` and the models are resolved on first access, so
`import jobrouter.providers` or the CLI's `--help` does not load the engine, the store or pydantic.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from jobrouter.errors import (
    AttemptNotFound,
    BudgetCrossed,
    BudgetExhausted,
    BudgetUnheld,
    ConfigError,
    IdempotencyConflict,
    InvalidIdempotencyKey,
    InvalidIdentity,
    InvalidText,
    InvalidTransition,
    JobNotFound,
    JobRefused,
    JobRouterError,
    LeaseLost,
    ListingError,
    NoEligibleProvider,
    ReinstateRefused,
    ResolutionInvalid,
    RouterClosed,
    SpendQueryInvalid,
    StoreError,
    UnknownTask,
    WaitTimeout,
)
from jobrouter.states import AttemptState, JobState

if TYPE_CHECKING:
    from jobrouter.api import Router
    from jobrouter.models import Attempt, BudgetUse, Job, JobEvent, SpendLine, SpendReport

# name -> the module that defines it; imported when the name is first read (PEP 562).
_LAZY = {
    "Router": "jobrouter.api",
    "Attempt": "jobrouter.models",
    "Job": "jobrouter.models",
    "JobEvent": "jobrouter.models",
    "BudgetUse": "jobrouter.models",
    "SpendLine": "jobrouter.models",
    "SpendReport": "jobrouter.models",
}

__all__ = [
    "Attempt",
    "AttemptNotFound",
    "AttemptState",
    "BudgetCrossed",
    "BudgetExhausted",
    "BudgetUnheld",
    "BudgetUse",
    "ConfigError",
    "IdempotencyConflict",
    "InvalidIdempotencyKey",
    "InvalidIdentity",
    "InvalidText",
    "InvalidTransition",
    "Job",
    "JobEvent",
    "JobNotFound",
    "JobRefused",
    "JobRouterError",
    "JobState",
    "LeaseLost",
    "ListingError",
    "NoEligibleProvider",
    "ReinstateRefused",
    "ResolutionInvalid",
    "Router",
    "RouterClosed",
    "SpendLine",
    "SpendQueryInvalid",
    "SpendReport",
    "StoreError",
    "UnknownTask",
    "WaitTimeout",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # the installed distribution's, never a second copy of it
        from importlib.metadata import version

        return version("jobrouter")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jobrouter' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
