"""A router process with workers and delivery through NATS, for kill tests: opens a `Router`
on a database with a config (JSON of `RouterConfig`), prints `ready <worker id>` once its NATS
delivery is set up, then runs until killed.

    python -m tests.support.nats_router --db URL --config CONFIG.json
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from jobrouter import Router
from jobrouter.bus_nats import NatsDelivery
from jobrouter.config import RouterConfig


async def serve(db: str, config: RouterConfig) -> None:
    async with Router.open(db, config) as router:
        assert isinstance(router.deliverer, NatsDelivery) and router.engine is not None
        await router.deliverer.ready.wait()
        print(f"ready {router.engine.worker_id}", flush=True)
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--config", required=True, type=Path)
    args = parser.parse_args()
    config = RouterConfig.model_validate_json(args.config.read_text("utf-8"))
    asyncio.run(serve(args.db, config))


if __name__ == "__main__":
    main()
