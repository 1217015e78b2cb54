"""Calls a provider with hostile answers, in a process of its own, and reports what each cost.

``python -m tests.providers.hostile_client --transport openai --api-base URL --shapes JSON``
sets each shape's scenario on the fault server (its /control), makes one call, and prints one
JSON line per shape: the error's kind, class, status and message, the growth of the process's
peak RSS over the call (VmHWM after, VmRSS before; the peak is reset through
/proc/self/clear_refs first) and the longest the event loop went without running a 5 ms ticker.
A first ordinary call, a first error answer and a first cut connection warm the transport up
(litellm's lazy setup on its first call and on its first failures is not what is measured).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from jobrouter.providers.base import CompletionRequest, Message
from jobrouter.providers.config import ProviderConfig
from jobrouter.providers.errors import ProviderError
from jobrouter.providers.transports import build_provider
from tests.providers.fault_server import FaultServer

TICK = 0.005


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


class Ticker:
    """The longest gap between two runs of a task that asks to run every `TICK` seconds: on the
    wall clock (`worst`), and in CPU time of the loop's own thread (`worst_cpu`). The second is
    what the loop spent working between two ticks: a process that waits for a core on a busy
    machine loses wall time but no CPU time, a loop blocked decompressing a body spends both."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.worst_cpu = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last, last_cpu = loop.time(), time.thread_time()
        while True:
            await asyncio.sleep(TICK)
            now, now_cpu = loop.time(), time.thread_time()
            self.worst = max(self.worst, now - last - TICK)
            self.worst_cpu = max(self.worst_cpu, now_cpu - last_cpu)
            last, last_cpu = now, now_cpu

    def __enter__(self) -> Ticker:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()


def _reset_peak() -> int:
    """Reset VmHWM to the current RSS (Linux: clear_refs 5); the current RSS, KiB."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    return _status_kib("VmRSS")


async def _one(provider: Any, deadline: float) -> dict[str, Any]:
    request = CompletionRequest(
        messages=(Message(role="user", content="hi"),), max_tokens=16, timeout=deadline
    )
    before = _reset_peak()
    started = time.monotonic()
    with Ticker() as ticker:
        try:
            await provider.complete(request)
            outcome: dict[str, Any] = {"kind": "succeeded"}
        except ProviderError as exc:
            outcome = {
                "kind": exc.kind.value,
                "error": type(exc).__name__,
                "status": exc.status,
                "message": exc.message,
            }
        await asyncio.sleep(3 * TICK)  # the ticker sees the loop after the call too
    outcome["seconds"] = time.monotonic() - started
    outcome["rss_growth_kib"] = _status_kib("VmHWM") - before
    outcome["worst_lag"] = ticker.worst
    outcome["worst_loop_cpu"] = ticker.worst_cpu
    return outcome


async def run(transport: str, server: FaultServer, shapes: dict[str, dict[str, Any]]) -> None:
    provider = build_provider(
        "hostile",
        ProviderConfig(
            model="openai/fault-model",
            api_base=server.api_base,
            transport=transport,
            structured_output="none",
            retry={"attempts": 1},
            timeout={"read": 20.0},
        ),
    )
    async with provider:
        await provider.warm_up()
        # warm: a connection made, litellm's first call and first failure done (its lazy
        # imports and setup on each are seconds of loop time no body causes)
        for warm in ({"kind": "answer"}, {"kind": "status", "status": 500}, {"kind": "reset"}):
            server.reset(default=warm)
            await _one(provider, 20.0)
        for name, spec in shapes.items():
            server.reset(default=spec["scenario"])
            outcome = await _one(provider, float(spec.get("timeout", 20.0)))
            print(json.dumps({"shape": name, **outcome}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--transport", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--shapes", required=True, help="JSON: name -> {scenario, timeout}")
    args = parser.parse_args()
    asyncio.run(run(args.transport, FaultServer(port=args.port), json.loads(args.shapes)))


if __name__ == "__main__":
    main()
