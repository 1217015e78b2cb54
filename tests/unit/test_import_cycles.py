"""No import cycle among jobrouter's modules, type-only (`if TYPE_CHECKING:`) and deferred
(inside a function) imports included: a cycle a reader must hold in mind is still a cycle,
whether or not Python runs it. Beside tests/unit/test_import_name.py, which keeps the layers
(providers <- contracts <- router) apart; this keeps the modules inside each layer in one
direction too. A parent package that Python imports on the way to a module is not counted: it
is not an import the module's author wrote."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# folder of the checkout -> the package it is inside jobrouter (as tests/unit/test_import_name)
FOLDERS = {
    "router": "jobrouter",
    "providers": "jobrouter.providers",
    "contracts": "jobrouter.contracts",
}
# Cycles known and being removed, each by its modules: an allowance fails once its cycle is
# gone, so whoever removes the cycle removes the allowance with it. None today (the last, of
# AttemptStart in store/claims.py, went with router/store/starts.py).
ALLOWED_CYCLES: set[frozenset[str]] = set()


def modules() -> dict[str, tuple[Path, bool]]:
    """Every module of jobrouter: its name -> (file, is a package's __init__)."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            found[name] = (path, is_package)
    return found


def imported_by(name: str, path: Path, is_package: bool, known: Mapping[str, object]) -> set[str]:
    """The jobrouter modules a module imports, wherever the import statement stands:
    `from jobrouter.store import bus` is `jobrouter.store.bus`, `from jobrouter.store import
    SqlStore` is `jobrouter.store`; relative imports resolved."""
    package = name if is_package else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            for alias in node.names:
                named.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    imported = set()
    for module in named:
        while module and module not in known:  # `import jobrouter.x.Y`: the module part
            module = module.rpartition(".")[0]
        if module and module != name:
            imported.add(module)
    return imported


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported_by(name, path, pkg, known) for name, (path, pkg) in known.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative),
    and any module that imports itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph.get(node, ()):
                    found.append(frozenset(group))
    return found


def test_the_cycle_finder_sees_direct_long_and_self_cycles() -> None:
    graph = {
        "a": {"b"},
        "b": {"a"},
        "c": {"d"},
        "d": {"e"},
        "e": {"c", "f"},
        "f": set(),
        "g": {"g"},
    }
    assert sorted(map(sorted, cycles(graph))) == [["a", "b"], ["c", "d", "e"], ["g"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_counts_type_only_and_deferred_imports(tmp_path: Path) -> None:
    """mutant seen failing: `ast.walk` replaced by the module's top-level statements only
    (the TYPE_CHECKING import of store/bus.py in store/outbox.py was not seen)."""
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from jobrouter.store.bus import BusOutbox\n"
        "def f():\n    from jobrouter import fleet\n"
        "from . import connector\n"
        "from jobrouter.store import SqlStore\n"
    )
    known = {name: None for name in modules()}
    assert imported_by("jobrouter.store.m", source, False, known) == {
        "jobrouter.store.bus",
        "jobrouter.fleet",
        "jobrouter.store.connector",
        "jobrouter.store",
    }


def test_no_import_cycle_among_jobrouters_modules() -> None:
    """mutant seen failing: store/bus.py importing OutboxStore from store/outbox.py under
    TYPE_CHECKING (the bus <-> outbox cycle this test was written on)."""
    found = cycles(import_graph())
    unexpected = [sorted(group) for group in found if group not in ALLOWED_CYCLES]
    assert not unexpected, unexpected


def test_every_allowed_cycle_still_exists() -> None:
    """An allowance outlives its cycle only by mistake: remove it with the cycle."""
    found = set(cycles(import_graph()))
    gone = [sorted(group) for group in ALLOWED_CYCLES if group not in found]
    assert not gone, ("cycle removed: delete its entry of ALLOWED_CYCLES", gone)
