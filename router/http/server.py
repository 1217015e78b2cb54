"""Running the app: uvicorn inside the caller's event loop, next to the router's engine."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from jobrouter.api import Router
from jobrouter.config import HttpConfig, RouterConfig
from jobrouter.http.app import create_app

log = logging.getLogger("jobrouter.http")

GRACEFUL_S = 5.0  # open event streams are cut after this on shutdown; clients resume them
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def serve(
    router: Router,
    *,
    host: str | None = None,
    port: int | None = None,
    settings: HttpConfig | None = None,
    sock: socket.socket | None = None,
    access_log: bool = True,
) -> None:
    """Serve `router` over HTTP until SIGINT/SIGTERM. `sock`, when given, is an already bound
    socket (tests bind port 0 to get a free port without a race)."""
    settings = settings or router.config.http
    app = create_app(router, settings)
    config = uvicorn.Config(
        app,
        host=host or settings.host,
        port=settings.port if port is None else port,
        access_log=access_log,
        timeout_graceful_shutdown=int(GRACEFUL_S),
        lifespan="off",
        log_config=None,
    )
    server = _Server(config)
    await server.serve(sockets=[sock] if sock is not None else None)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, less raising the signal again after the graceful shutdown: the caller
        still has to close the router (its engine records attempts in flight as unknown), and
        a SIGINT raised again would cancel that close halfway."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


async def serve_config(
    config: RouterConfig | Path,
    *,
    host: str | None,
    port: int | None,
    database_url: str | None = None,
) -> None:
    """`jobrouter serve`: open the router and serve it at once; the providers warm up in the
    background (litellm's import) and the workers start after that (docs/benchmarks.md)."""
    async with Router.open(database_url, config, start_in_background=True) as router:
        await serve(router, host=host, port=port)
