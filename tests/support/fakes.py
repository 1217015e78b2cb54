"""A scriptable in-process provider for engine tests that need no network (unit level only:
provider behaviour over real HTTP is tested against the fault server in tests/providers)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from jobrouter.providers import Completion, CompletionRequest, ProviderError


@dataclass
class Step:
    """What the fake does for one call: wait `delay` (or until `release` is set), then answer
    `output` or raise `error`; `hang` never answers."""

    output: Any = None
    error: ProviderError | None = None
    delay: float = 0.0
    hang: bool = False
    release: asyncio.Event | None = None


class Lifecycle:
    """The `Provider` members of a fake with nothing to load or release and no model of its
    own to record (an attempt then records the model its answer names)."""

    model: str | None = None

    async def warm_up(self) -> None:
        pass

    async def close(self) -> None:
        pass


@dataclass
class FakeProvider:
    name: str
    steps: list[Step] = field(default_factory=list)
    default: Step = field(default_factory=lambda: Step(output={"text": "ok"}))
    fingerprint: str = "fake"
    model: str = "fake/model"
    calls: list[CompletionRequest] = field(default_factory=list)
    in_flight: int = 0
    # Awaited first on every call, before the step: lets a test look at the world (e.g. read
    # the database over another connection) at the moment the provider is called.
    on_call: Callable[[CompletionRequest], Awaitable[None]] | None = None
    warmed: int = 0  # warm_up calls
    closed: int = 0  # close calls

    async def warm_up(self) -> None:
        self.warmed += 1

    async def close(self) -> None:
        self.closed += 1

    async def complete(self, request: CompletionRequest) -> Completion:
        self.calls.append(request)
        if self.on_call is not None:
            await self.on_call(request)
        step = self.steps.pop(0) if self.steps else self.default
        self.in_flight += 1
        try:
            if step.hang:
                await asyncio.Event().wait()
            if step.release is not None:
                await step.release.wait()
            if step.delay:
                await asyncio.sleep(step.delay)
            if step.error is not None:
                raise step.error
            return Completion(text=str(step.output), output=step.output, model=self.model)
        finally:
            self.in_flight -= 1
