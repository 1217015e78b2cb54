"""Assembly: configuration -> task runtimes, providers, eligibility gate (the engine and what
runs beside it: `jobrouter.fleet`).

This is where the layers meet: contracts are loaded, litellm providers are built (lazily), and
the gate that refuses uncertified providers is put over them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from jobrouter.config import RouterConfig, TaskConfig, load_config
from jobrouter.errors import ConfigError
from jobrouter.policy import TaskPolicy, by_price
from jobrouter.providers import Provider
from jobrouter.tasks import TaskRuntime

if TYPE_CHECKING:
    from jobrouter.breaker import Breakers
    from jobrouter.contracts import Contract
    from jobrouter.gate import Gate
    from jobrouter.providers.pricing import Pricing
    from jobrouter.spending import Spending
    from jobrouter.store.sqlstore import SqlStore


async def warm_up(providers: Iterable[Provider]) -> None:
    """Let each provider do now what its first call would do first (litellm: seconds of import
    and first-call setup). Called before a process claims jobs or certifies: that time must
    not block the loop while claims are held, nor count against a first attempt's deadline."""
    for provider in providers:
        await provider.warm_up()


def resolve_config(config: RouterConfig | str | Path | None) -> RouterConfig:
    if config is None:
        return RouterConfig()
    if isinstance(config, RouterConfig):
        return config
    return load_config(config)


def build_tasks(config: RouterConfig) -> dict[str, TaskRuntime]:
    return {name: _task_runtime(name, task, config) for name, task in config.tasks.items()}


class TasksOnUse(Mapping[str, TaskRuntime]):
    """Every configured task, each runtime built (its contract loaded) when first read, as
    `build_tasks` builds it: a command that touches one task loads one contract. Its names are
    the config's, so `in`, `sorted` and "configured tasks: ..." read no contract."""

    def __init__(self, config: RouterConfig) -> None:
        self._config = config
        self._built: dict[str, TaskRuntime] = {}

    def __getitem__(self, name: str) -> TaskRuntime:
        runtime = self._built.get(name)
        if runtime is None:
            runtime = _task_runtime(name, self._config.tasks[name], self._config)
            self._built[name] = runtime
        return runtime

    def __iter__(self) -> Iterator[str]:
        return iter(self._config.tasks)

    def __len__(self) -> int:
        return len(self._config.tasks)


def _task_runtime(name: str, task: TaskConfig, config: RouterConfig) -> TaskRuntime:
    contract = task_contract(name, task, config.base_dir)
    fingerprint = None
    if contract is not None:
        from jobrouter.contracts import contract_fingerprint

        fingerprint = contract_fingerprint(contract)
    side_effects = _side_effects(name, task, contract.side_effects if contract else None)
    policy = TaskPolicy(
        providers=_provider_order(task, config),
        max_attempts=task.max_attempts,
        exclusive=side_effects == "external",
        hedge_after=task.hedge_after,
    )
    return TaskRuntime(
        name=name,
        policy=policy,
        deadline_s=task.deadline,
        attempt_timeout_s=task.attempt_timeout,
        contract=contract,
        contract_fingerprint=fingerprint,
        watched=config.certification.watch.enabled,
        on_budget=task.on_budget,
    )


def _provider_order(task: TaskConfig, config: RouterConfig) -> tuple[str, ...]:
    """The order the policy tries the task's providers in, on every path (a job started as it
    is created, a claim's first attempt, every failover): as configured, or with `order =
    "cost"` cheapest first (`jobrouter.policy.by_price`), priced once here as the attempts'
    costs are (`resolve_price`: the configured price, else litellm's shipped map)."""
    if task.order == "config":
        return tuple(task.providers)
    from jobrouter.providers.pricing import resolve_price
    from jobrouter.reservations import comparable_price

    prices = {
        name: comparable_price(resolve_price(name, config.providers[name]))
        for name in task.providers
        if name in config.providers
    }
    return by_price(task.providers, prices)


def task_contract(name: str, task: TaskConfig, base_dir: Path | None) -> Contract | None:
    """The task's contract, loaded as the router loads it; a ConfigError at
    `tasks.NAME.contract` when it cannot be (no such file, not a contract)."""
    if task.contract is None:
        return None
    from jobrouter.contracts import ContractError, load_contract

    try:
        return load_contract(
            _contract_ref(task.contract, base_dir), search_dirs=[base_dir] if base_dir else []
        )
    except ContractError as exc:
        raise ConfigError(str(exc), key=f"tasks.{name}.contract") from exc


def _side_effects(name: str, task: TaskConfig, contract: str | None) -> str:
    """The task's side effects: the contract's, which a task may tighten, never loosen (a
    contract that says `external` made its certification under that promise). Without a
    contract nothing says repeating is harmless: `external` unless the task says `none`."""
    if contract == "external" and task.side_effects == "none":
        raise ConfigError(
            'side_effects = "none" would loosen the contract\'s "external": '
            "a task may only tighten it; remove the key or change the contract",
            key=f"tasks.{name}.side_effects",
        )
    return task.side_effects or contract or "external"


def _contract_ref(ref: str, base_dir: Path | None) -> str:
    """A relative contract path in a config file is relative to that file's folder (not to the
    working directory); a bare name is looked up in `base_dir`, then in contracts/library/."""
    is_path = "/" in ref or os.sep in ref or ref.endswith((".yaml", ".yml"))
    if base_dir is None or not is_path or os.path.isabs(ref):
        return ref
    return str(base_dir / ref)


def build_providers(
    config: RouterConfig, given: Mapping[str, Provider] | None
) -> dict[str, Provider]:
    providers: dict[str, Provider] = dict(given or {})
    missing = [name for name in config.providers if name not in providers]
    if missing:
        from jobrouter.providers.transports import build_provider

        for name in missing:
            providers[name] = build_provider(name, config.providers[name])
    return providers


class ProvidersOnUse(Mapping[str, Provider]):
    """The configured providers by name (and the `given` ones, which replace configured ones of
    the same name), each configured one built when first read: a router that calls none (the
    CLI's quick commands) imports no transport. `built` is what there is to close."""

    def __init__(self, config: RouterConfig, given: Mapping[str, Provider] | None) -> None:
        self._config = config
        self._built: dict[str, Provider] = dict(given or {})
        self._names = [*self._built, *(n for n in config.providers if n not in self._built)]

    def __getitem__(self, name: str) -> Provider:
        provider = self._built.get(name)
        if provider is None:
            if name not in self._config.providers:
                raise KeyError(name)
            from jobrouter.providers.transports import build_provider

            provider = self._built[name] = build_provider(name, self._config.providers[name])
        return provider

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def built(self) -> list[Provider]:
        return list(self._built.values())


def build_gate(
    store: SqlStore, config: RouterConfig, providers: Mapping[str, Provider]
) -> tuple[Gate, Breakers]:
    """The eligibility gate over `providers`, and the circuit breakers it consults (an engine
    records its outcomes in the same breakers: `jobrouter.fleet.build_engine`)."""
    # Imported here: `config check` builds tasks from this module and opens no store.
    from jobrouter.breaker import Breakers, BreakerSettings
    from jobrouter.gate import Gate

    breakers = Breakers(
        store.circuits,
        BreakerSettings(
            failure_threshold=config.breaker.failure_threshold,
            cooldown_s=config.breaker.cooldown,
            probe_s=config.breaker.probe_timeout,
        ),
    )
    gate = Gate(
        store.certifications,
        providers,
        breakers,
        required=config.certification.required,
        config_file=config.config_file,
    )
    return gate, breakers


def build_spending(config: RouterConfig) -> Spending:
    """The job path's port to `[budgets]`; a provider's price is resolved when a budget first
    charges it (litellm's cost map is parsed only then)."""
    from jobrouter.spending import Spending

    def price_of(name: str) -> Pricing:
        from jobrouter.providers.pricing import UnknownPrice, resolve_price

        if name not in config.providers:
            return UnknownPrice(f"provider {name} is not configured, so it has no price")
        return resolve_price(name, config.providers[name])

    return Spending(config.budgets, price_of)
