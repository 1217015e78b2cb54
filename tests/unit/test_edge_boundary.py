"""The Router is the boundary (issue 26): the edges (router/http, router/ui, router/cli) call
`Router`'s methods, never its parts (`router.store`, `router.tasks`, `router.engine`, ...),
and open no engine. Read statically, so a reach on a path no test runs is caught too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import jobrouter

PACKAGE = Path(jobrouter.__file__).parent
EDGES = ("http", "ui", "cli")
# What a Router holds, not what it offers: reaching these is reaching past the door.
PARTS = frozenset({"store", "tasks", "engine", "gate", "leader", "deliverer", "spending", "limits"})
# Each reach that stays, and why (its line also says so).
ALLOWED = {
    # The OpenAPI document is a function of the configured tasks alone and is built from a
    # namespace holding just them (tests/acceptance/test_openapi.py): no Router there.
    ("http/app.py", "tasks"),
}
# Modules an edge must not import: what runs jobs, which only the Router builds.
RUNNERS = ("jobrouter.engine", "jobrouter.fleet", "jobrouter.driver", "jobrouter.worker")


def edge_modules() -> list[Path]:
    return sorted(p for edge in EDGES for p in (PACKAGE / edge).rglob("*.py"))


def reaches(tree: ast.AST) -> list[tuple[int, str]]:
    """`router.<part>` and `<...>.router.<part>` (request.app.state.router.store)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr not in PARTS:
            continue
        held = node.value
        named = (isinstance(held, ast.Name) and held.id == "router") or (
            isinstance(held, ast.Attribute) and held.attr == "router"
        )
        if named:
            found.append((node.lineno, node.attr))
    return found


def runner_imports(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [name for name in names if name.startswith(RUNNERS)]


def test_no_edge_reaches_into_the_router() -> None:
    """Mutant: an edge reading `router.store.jobs.get_job` again (as http/jobs.py's
    `_visible_job` did), seen failing; so does the ALLOWED entry removed."""
    problems = []
    for path in edge_modules():
        where = str(path.relative_to(PACKAGE))
        for line, part in reaches(ast.parse(path.read_text("utf-8"))):
            if (where, part) not in ALLOWED:
                problems.append(f"router/{where}:{line}: router.{part}")
    assert problems == [], "call a Router method instead:\n" + "\n".join(problems)


def test_the_check_sees_each_spelling_of_a_reach() -> None:
    """The detector itself: each way an edge names the router is seen, a method is not."""
    source = (
        "router.store.jobs.get_job(x)\n"
        "request.app.state.router.engine.wake()\n"
        "sorted(router.tasks)\n"
        "await router.visible_job(x, to=None)\n"
        "store.jobs.get_job(x)\n"
    )
    assert sorted(reaches(ast.parse(source))) == [(1, "store"), (2, "engine"), (3, "tasks")]


def test_no_edge_imports_what_runs_jobs() -> None:
    """Mutant: `from jobrouter.engine import Engine` in an edge module."""
    problems = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in edge_modules()
        for name in runner_imports(ast.parse(path.read_text("utf-8")))
    ]
    assert problems == []


def test_every_allowed_reach_is_still_there() -> None:
    """An exception no longer used is removed, so the list says only what is true."""
    seen = {
        (str(path.relative_to(PACKAGE)), part)
        for path in edge_modules()
        for _, part in reaches(ast.parse(path.read_text("utf-8")))
    }
    assert seen >= ALLOWED


def test_the_parts_are_what_router_init_holds() -> None:
    """PARTS names what `Router.__init__` keeps (a part renamed there would slip past)."""
    tree = ast.parse((PACKAGE / "api.py").read_text("utf-8"))
    init = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "__init__"
    )
    held = {
        target.attr
        for node in ast.walk(init)
        for target in getattr(node, "targets", [getattr(node, "target", None)])
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }
    assert held >= PARTS
