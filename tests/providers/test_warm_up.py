"""A process that will call providers does litellm's first-call setup before its first attempt
or certification call, on a local path that sends nothing.

litellm's first completion in a process spends 0.3-2.4 s (measured 0.73 s on a loopback stub)
importing `litellm.proxy._types` and rebuilding models before its request leaves; inside an
attempt that counts against the provider's read deadline, so a fresh worker's first attempt
with a 1 s read timeout could end `unknown` although the server was never slow. Each check
runs in a fresh Python process: in this one litellm is already warm.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from jobrouter.certifier import Pair, certify_pair
from jobrouter.contracts import contract_fingerprint, load_contract
from jobrouter.providers.base import Completion, CompletionRequest
from jobrouter.store import open_store
from tests.providers.fault_server import FaultServer
from tests.support.fakes import FakeProvider

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "tests" / "acceptance" / "contracts" / "echo.yaml"

CONFIG = """
[database]
url = "sqlite:///{db}"

[certification]
required = false

[providers.fault]
model = "openai/fault-model"
api_base = "{api_base}"
timeout = {{ connect = 1, read = 1 }}

[tasks.echo]
contract = "{contract}"
providers = ["fault"]
max_attempts = 1
"""

WORKER = """
import asyncio, json, sys
from jobrouter import Router

async def main() -> None:
    async with Router.open(config=sys.argv[1]) as router:
        warmed = "litellm.proxy._types" in sys.modules
        job = await router.submit("shop-1", "first-job", "echo", {"text": "hi"})
        job = await router.wait(job.id, timeout=120)
        attempts = await router.attempts(job.id)
    print(json.dumps({"warmed_before_first_job": warmed, "state": job.state.value,
                      "attempts": [[a.state.value, a.error] for a in attempts]}))

asyncio.run(main())
"""

PROVIDER_ONLY = """
import asyncio, json, sys
from jobrouter.providers.config import ProviderConfig
from jobrouter.providers.litellm_provider import LiteLLMProvider

async def main() -> None:
    provider = LiteLLMProvider("fault", ProviderConfig(model="openai/fault-model",
                                                       api_base=sys.argv[1]))
    async with provider:
        await provider.warm_up()
        print(json.dumps({"warmed": "litellm.proxy._types" in sys.modules}))

asyncio.run(main())
"""


def _run(script: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_warm_up_runs_the_first_call_setup_and_sends_nothing(fault: FaultServer) -> None:
    """Fails on the old `warm_up`, which only imported litellm: the first-call setup
    (`litellm.proxy._types`) was left to the first real call."""
    result = _run(PROVIDER_ONLY, fault.api_base)
    assert result == {"warmed": True}
    assert fault.stats()["total"] == 0  # the warm-up is local: no request reached the server


def test_a_fresh_worker_first_attempt_with_a_1s_read_timeout_succeeds(
    fault: FaultServer, tmp_path: Path
) -> None:
    """A fresh process with in-process workers is warm before it takes its first job, and that
    job's only attempt (read timeout 1 s, no retry, no fallback) succeeds with one request."""
    config = tmp_path / "jobrouter.toml"
    config.write_text(
        CONFIG.format(db=tmp_path / "jobs.db", api_base=fault.api_base, contract=CONTRACT)
    )
    result = _run(WORKER, str(config))
    assert result["warmed_before_first_job"] is True
    assert result["state"] == "succeeded", result
    assert result["attempts"] == [["succeeded", None]]
    assert fault.stats()["total"] == 1


async def test_certification_warms_the_provider_before_its_first_call(tmp_path: Path) -> None:
    """`contracts run` opens the router without workers, so nothing warmed its providers: the
    first certification call paid litellm's first-call setup inside its deadline. Fails when
    `certify_pair` does not call `warm_up` first."""
    order: list[str] = []

    class Recording(FakeProvider):
        async def warm_up(self) -> None:
            order.append("warm_up")

        async def complete(self, request: CompletionRequest) -> Completion:
            order.append("complete")
            return await super().complete(request)

    contract = load_contract("product_title")
    pair = Pair("fake", contract, contract_fingerprint(contract))
    store = await open_store(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        await certify_pair(store.certifications, Recording("fake"), pair, ttl_days=1)
    finally:
        await store.close()
    assert order[0] == "warm_up"
    assert order.count("warm_up") == 1 and "complete" in order
