"""Test-only server entry: `python -m tests.acceptance.serve_fixture --config jobrouter.toml`.

Opens the router with in-process providers that answer offline after a delay (provider
behaviour over real HTTP is tested in tests/providers; here the HTTP layer is under test),
binds 127.0.0.1 on a free port, prints `PORT <n>` on stdout and serves until SIGTERM.

Providers: `fast` answers after 10 ms, `slow` after 0.8 s, `hang` never (its attempts time out
and become `unknown`), `gated` once the file named by $JOBROUTER_TEST_GATE exists, `gate` once
the file named by the input's `text` exists (the test decides when, by creating it).
With `--background` the router starts as `jobrouter serve` starts it: listening before the
providers warm up, the workers after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from pathlib import Path

from jobrouter.api import Router
from jobrouter.http.server import serve
from jobrouter.providers import Completion, CompletionRequest
from tests.support.fakes import Lifecycle


class DelayedEcho(Lifecycle):
    def __init__(self, name: str, delay: float) -> None:
        self.name = name
        self.delay = delay
        self.fingerprint = f"test-{name}"
        self.model = f"test/{name}"

    async def warm_up(self) -> None:
        """With $JOBROUTER_TEST_WARM_GATE, the warm-up (litellm's import, for a real provider)
        lasts until that file exists: the test decides when the workers may start."""
        gate = os.environ.get("JOBROUTER_TEST_WARM_GATE")
        while gate and not Path(gate).exists():  # noqa: ASYNC110, ASYNC240 (polled: see GatedEcho)
            await asyncio.sleep(0.02)

    async def complete(self, request: CompletionRequest) -> Completion:
        await asyncio.sleep(self.delay)
        text = request.messages[-1].content
        return Completion(text=text, output={"text": text}, model=self.model)


class GatedEcho(DelayedEcho):
    """Answers once the file named by $JOBROUTER_TEST_GATE exists: a test decides when an
    attempt finishes (an event), instead of racing a delay."""

    async def complete(self, request: CompletionRequest) -> Completion:
        gate = Path(os.environ["JOBROUTER_TEST_GATE"])
        # The gate is a file another process makes: no event crosses processes, so poll it.
        while not gate.exists():  # noqa: ASYNC110, ASYNC240
            await asyncio.sleep(0.02)
        return await super().complete(request)


class InputGatedEcho(DelayedEcho):
    """Answers once the file named by the input's `text` exists (one gate per job)."""

    async def complete(self, request: CompletionRequest) -> Completion:
        gate = Path(request.messages[-1].content.removeprefix("Echo "))  # contracts/echo.yaml
        while not gate.exists():  # noqa: ASYNC110, ASYNC240 (polled: see GatedEcho)
            await asyncio.sleep(0.01)
        return await super().complete(request)


PROVIDERS = {
    "fast": DelayedEcho("fast", 0.01),
    "slow": DelayedEcho("slow", 0.8),
    "hang": DelayedEcho("hang", 3600.0),
    "gated": GatedEcho("gated", 0.0),
    "gate": InputGatedEcho("gate", 0.0),
}


async def main(config: str, background: bool) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    opening = Router.open(config=config, providers=PROVIDERS, start_in_background=background)
    async with opening as router:
        await serve(router, sock=sock, access_log=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument(
        "--background", action="store_true", help="warm up and start the workers as serve does"
    )
    arguments = parser.parse_args()
    asyncio.run(main(arguments.config, arguments.background))
    sys.exit(0)
