"""A wait that keeps its caller's cancellation (a worker's loops must stop when told to)."""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until `event` is set (True) or `timeout_s` has passed (False).

    Not `asyncio.wait_for(event.wait(), timeout_s)`: on Python 3.11, when the task waiting is
    cancelled in the loop turns between the event being set and the task resuming, `wait_for`
    returns the event's result and the cancellation is lost. A loop waiting on its wake-up
    that way goes on after `cancel()`, and whoever awaits it (a stopping worker) waits
    forever."""
    try:
        async with asyncio.timeout(timeout_s):
            return await event.wait()
    except TimeoutError:
        return False


def stop_if_cancelled() -> None:
    """Raise `CancelledError` when the running task was told to stop but the request was lost.

    On Python 3.11 `asyncio.wait_for` returns the inner result when the cancel comes in the
    loop turn after the inner future finished, and so does every library built on it (nats-py's
    `next_msg`, hence `fetch`, `request` and `ack_sync`): the `CancelledError` never reaches
    the caller, but `Task.cancelling()` still counts the request. A loop that goes on after
    errors calls this at its head, or it goes on after `cancel()` as well, and whoever awaits
    it (a stopping router, a task group's end) waits forever."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
