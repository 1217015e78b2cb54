"""A clock a test moves by hand: code that takes a `clock` callable decides on the time the test
sets, never on the wall clock (tests decide on events, not on waits)."""

from __future__ import annotations


class ManualClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
