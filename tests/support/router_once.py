"""A second router process for resilience tests: open a `Router` on a database, run one job to
its end, print what happened as one JSON line.

    python -m tests.support.router_once --db URL --config CONFIG.json --task NAME --key KEY

`CONFIG.json` is a `RouterConfig` as JSON (`RouterConfig.model_dump_json()`). The line printed
is {"job": {...}, "attempts": [...], "events": [...]}; the exit code is 0 when the job settled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from jobrouter import Router
from jobrouter.config import RouterConfig


async def run_once(db: str, config: RouterConfig, task: str, key: str, wait_s: float) -> str:
    async with Router.open(db, config) as router:
        job = await router.submit("router-b", key, task, {"from": "router B"})
        job = await router.wait(job.id, timeout=wait_s)
        attempts = await router.attempts(job.id)
        events = await router.events(job.id)
    return json.dumps(
        {
            "job": job.model_dump(mode="json"),
            "attempts": [attempt.model_dump(mode="json") for attempt in attempts],
            "events": [event.model_dump(mode="json") for event in events],
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--task", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args()
    config = RouterConfig.model_validate_json(args.config.read_text("utf-8"))
    print(asyncio.run(run_once(args.db, config, args.task, args.key, args.timeout)), flush=True)


if __name__ == "__main__":
    main()
