"""A router that runs nothing builds only what it uses (issue 30, quick commands): with
`tasks_on_use` a task's contract is loaded when the task is first used, and a configured
provider is built only when it is read (a router that calls none imports no transport).
The door is the same door: a job of the task is refused for the same reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobrouter import Router
from jobrouter.config import CertificationConfig, RouterConfig, TaskConfig
from jobrouter.errors import ConfigError, JobRefused
from jobrouter.providers.config import ProviderConfig
from jobrouter.states import JobState
from tests.support.store_jobs import count_jobs
from tests.unit.test_door import GOOD, contract, url


def config(tmp_path: Path) -> RouterConfig:
    """Task `post` with a contract; task `broken` whose contract file does not exist."""
    return RouterConfig(
        providers={"a": ProviderConfig(model="openai/a", api_base="http://127.0.0.1:9/v1")},
        tasks={
            "post": TaskConfig(contract=str(contract(tmp_path)), providers=["a"]),
            "broken": TaskConfig(contract=str(tmp_path / "missing.yaml"), providers=["a"]),
        },
        certification=CertificationConfig(required=False),
    )


async def test_every_contract_is_loaded_at_open_by_default(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        await Router.open(url(tmp_path), config(tmp_path), run_workers=False)
    assert caught.value.key == "tasks.broken.contract"


async def test_on_use_a_task_loads_its_own_contract_only(tmp_path: Path) -> None:
    """mutant: `TasksOnUse` building every runtime when made, seen failing (the open raises
    the broken task's ConfigError)."""
    async with Router.open(
        url(tmp_path), config(tmp_path), run_workers=False, tasks_on_use=True
    ) as router:
        job = await router.submit("shop", "k1", "post", GOOD)
        assert job.created and job.state is JobState.QUEUED
        with pytest.raises(JobRefused) as refused:  # the door of the task, as ever
            await router.submit("shop", "k2", "post", {"product": {}})
        assert refused.value.field == "input.product"
        with pytest.raises(ConfigError) as broken:
            await router.submit("shop", "k3", "broken", GOOD)
        assert broken.value.key == "tasks.broken.contract"
        with pytest.raises(ConfigError, match="configured tasks: broken, post"):
            await router.submit("shop", "k4", "nope", GOOD)
        assert await count_jobs(router.store) == 1


async def test_a_provider_is_built_when_read_and_closed_only_then(tmp_path: Path) -> None:
    """mutants: `ProvidersOnUse` building every configured provider when made, and `close`
    closing `providers.values()` (building the unread one to close it), each seen failing."""
    cfg = config(tmp_path).model_copy(update={"tasks": {}})
    cfg.providers["b"] = cfg.providers["a"]
    async with Router.open(url(tmp_path), cfg, run_workers=False) as router:
        assert list(router.providers) == ["a", "b"] and router.providers.built() == []
        provider = router.providers["a"]
        assert router.providers.built() == [provider]
        assert router.gate.providers["a"] is provider  # the gate reads the same mapping
    assert router.providers.built() == [provider]  # closed without building `b`
