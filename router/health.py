"""The provider-health port: what a job's driver asks and tells about providers' health.

`eligibility` is the gate's verdict per provider (certification, then circuit); `acquire` claims
the right to call a provider (for an open circuit, its single probe); `record` counts a call's
outcome on the provider's circuit. Each goes straight to the object that owns it (router/gate.py,
router/breaker.py): build.py wires them, nothing in between forwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from jobrouter.policy import Eligibility
from jobrouter.providers import ProviderError
from jobrouter.tasks import TaskRuntime


@dataclass(frozen=True)
class ProviderHealth:
    eligibility: Callable[[TaskRuntime], Awaitable[dict[str, Eligibility]]]
    acquire: Callable[[str], Awaitable[bool]]
    record: Callable[[str, ProviderError | None], Awaitable[None]]
