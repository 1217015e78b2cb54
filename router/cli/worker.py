"""`jobrouter worker`: a process that only runs jobs (submitted elsewhere) until stopped."""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated

import typer

from jobrouter.api import Router
from jobrouter.cli.common import ConfigOpt, DatabaseOpt, run, settings
from jobrouter.logs import setup_logging
from jobrouter.printing import console


def worker(
    concurrency: Annotated[
        int | None,
        typer.Option(help="jobs driven at once (default: the config's \\[engine] workers)"),
    ] = None,
    grace: Annotated[
        float, typer.Option(help="on SIGTERM/SIGINT, seconds to let jobs in hand finish")
    ] = 10.0,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Run jobs from the database until SIGTERM or SIGINT.

    Start several (on several machines with PostgreSQL): each claims runnable jobs, and a job
    whose worker died is taken over once its claim expires; its attempt in flight becomes
    `unknown`."""
    setup_logging()
    cfg = settings(config)
    if concurrency is not None:
        cfg = cfg.model_copy(
            update={"engine": cfg.engine.model_copy(update={"workers": concurrency})}
        )

    async def step() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        router = await Router.open(database, cfg)
        console.print(
            f"worker {router.worker_id} on {router.database_url}: "
            f"{cfg.engine.workers} jobs at once; Ctrl-C to stop"
        )
        try:
            await stop.wait()
        finally:
            console.print(f"stopping: up to {grace}s for jobs in hand")
            await router.close(grace)

    run(step)
