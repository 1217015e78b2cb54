"""Waiting in tests for what has no event to await (rows, stream state, log lines): a check
polled until it holds, with a generous ceiling that only guards against hanging."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

Check = Callable[[], object]  # a truth value, or an awaitable of one


async def until(check: Check, what: str, within: float = 90.0, every: float = 0.05) -> None:
    """Poll `check` (plain or async) every `every` seconds until what it gives is true; fail
    the test with `what` if it is not within `within` seconds."""
    try:
        async with asyncio.timeout(within):
            while True:
                held = check()
                if inspect.isawaitable(held):
                    held = await held
                if held:
                    return
                await asyncio.sleep(every)
    except TimeoutError:
        raise AssertionError(f"no {what} within {within}s") from None
