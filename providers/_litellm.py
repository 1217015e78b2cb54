"""The one lazy import of litellm, with the settings jobrouter needs.

`import litellm` costs about 4 s and, without two environment variables, fetches a remote cost
map at import time. `load()` sets those variables (setdefault: an operator may override them),
imports litellm once, and applies the global settings below. Nothing else in the product
imports litellm; the module is typed `Any` so mypy does not analyse litellm's 9,000-line files.

Settings applied, and why:
- `suppress_debug_info = True`: litellm otherwise prints "Give Feedback / Get Help" and a
  debug hint to stdout on EVERY exception; we classify and report errors ourselves.
- `disable_hf_tokenizer_download = True`: `token_counter` for some model names would try to
  fetch a tokenizer from the Hugging Face hub; offline it must fall back to the bundled ones.
- never set `litellm.num_retries` (it feeds hidden retry layers); every call passes
  `num_retries=0, max_retries=0` instead (see `litellm_provider`).
Not switchable in litellm 1.110.2: the per-call success-logging task and its response-cost
calculation run on every call even with no callback configured (there is no public switch and
no `telemetry` flag in this version). jobrouter does not read the cost that calculation stores
(`_hidden_params["response_cost"]`): it prices both transports the same way
(`jobrouter.providers.pricing`), where litellm reports 0.0 for a model `register_model` declared.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from typing import Any

OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}

_configured = False
_warmed: set[str] = set()  # model strings whose litellm code path has run once in this process


def set_offline_env() -> None:
    for name, value in OFFLINE_ENV.items():
        os.environ.setdefault(name, value)


def load() -> Any:
    """litellm, imported (once) offline and configured for jobrouter."""
    global _configured
    set_offline_env()
    litellm: Any = importlib.import_module("litellm")
    if not _configured:
        litellm.suppress_debug_info = True
        litellm.disable_hf_tokenizer_download = True
        _configured = True
    return litellm


async def warm(model: str) -> None:
    """Run litellm's first-call setup for `model` now, on a local path that sends nothing.

    The first completion in a process does 0.3-2.4 s of lazy work before its request leaves
    (imports `litellm.proxy._types`, rebuilds pydantic models, loads the provider's handler):
    measured here, 0.73 s for a first call to a loopback stub against 0.03 s after this warm-up.
    Inside an attempt that time counts against the provider's read deadline, so a fresh
    worker's first attempt (or a first certification call) could end `unknown` and count
    against the circuit. A `mock_response` call runs the same request-building code through
    litellm's handler for `model` and returns before any HTTP client is used.
    """
    if model in _warmed:
        return
    # The import (seconds) runs on a thread: the event loop goes on answering meanwhile (a
    # server's /health/live while `jobrouter serve` warms up in the background).
    litellm = await asyncio.get_running_loop().run_in_executor(None, load)
    await litellm.acompletion(
        model=model,
        messages=[{"role": "user", "content": "warm-up"}],
        mock_response="{}",
        api_key="warm-up",
        num_retries=0,
        max_retries=0,
    )
    _warmed.add(model)


def loaded() -> Any | None:
    """litellm when something already imported it, else None (never imports it)."""
    return sys.modules.get("litellm")


async def close_clients() -> None:
    """Close litellm's cached async HTTP clients (if litellm was imported) and forget them.

    `close_litellm_async_clients` closes the clients but leaves them in litellm's per-event-loop
    client cache, so the next call on the same loop fails with "client has been closed"
    (measured). Flushing the cache makes litellm build fresh clients on the next call.
    """
    litellm = loaded()
    if litellm is None:
        return
    for _ in range(3):
        try:
            await litellm.close_litellm_async_clients()
            break
        except RuntimeError:
            # It iterates the live cache dict while awaiting each close; a concurrent eviction
            # makes it raise "dictionary changed size during iteration". Closing is idempotent.
            continue
    cache = getattr(litellm, "in_memory_llm_clients_cache", None)
    if cache is not None:
        cache.flush_cache()
