"""A call's outcome is counted on its provider's circuit by `Breakers.record` itself, with no
forwarding layer in between; a store that fails to write the count never loses the attempt's
outcome: the failure is logged and the driver goes on to record the outcome."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from jobrouter.breaker import Breakers, BreakerSettings
from jobrouter.providers import ProviderError
from jobrouter.store.circuits import CircuitRow, CircuitStore


class BrokenCircuits:
    """A store whose circuit writes fail, counting the attempts to write."""

    def __init__(self) -> None:
        self.writes = 0

    async def circuit_failure(self, provider: str, *, threshold: int) -> CircuitRow:
        self.writes += 1
        raise ConnectionError("the database went away")


async def test_a_failed_health_write_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = BrokenCircuits()
    breakers = Breakers(cast(CircuitStore, cast(Any, store)), BreakerSettings())
    error = ProviderError("503 from upstream", provider="a", status=503)
    assert error.counts_against_health
    with caplog.at_level(logging.ERROR, logger="jobrouter.engine"):
        await breakers.record("a", error)
    assert store.writes == 1
    assert "recording the health of provider a failed" in caplog.text
