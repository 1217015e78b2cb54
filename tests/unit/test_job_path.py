"""The job's path reads top to bottom: a job's driver knows its narrow collaborators (the
store, the provider-health port, the providers, its worker's limits) and never the engine that
starts it nor the router above, and an attempt's call (router/attempt_call.py) knows its
collaborators and never its driver; the policy is consulted through `jobrouter.step` only."""

from __future__ import annotations

import ast
from pathlib import Path

ROUTER = Path(__file__).resolve().parents[2] / "router"


def imported(module: str) -> set[str]:
    tree = ast.parse((ROUTER / f"{module}.py").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_driver_imports_neither_the_engine_nor_the_router() -> None:
    names = imported("driver")
    assert not {"jobrouter.engine", "jobrouter.api", "jobrouter.gate", "jobrouter.breaker"} & names


def test_an_attempt_call_knows_neither_its_driver_nor_anything_above() -> None:
    names = imported("attempt_call")
    above = {
        "jobrouter.driver",
        "jobrouter.engine",
        "jobrouter.api",
        "jobrouter.gate",
        "jobrouter.breaker",
    }
    assert not above & names


def test_only_the_step_asks_the_policy_to_decide() -> None:
    deciders = {
        path.stem
        for path in ROUTER.glob("*.py")
        if "jobrouter.policy.decide" in imported(path.stem)
    }
    assert deciders == {"step"}
