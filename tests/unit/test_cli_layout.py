"""The CLI's shape (router/cli/): the package registers its command modules by name, and no
command module imports the package that registers it (only its sibling `router.cli.common`);
the demo and the printing helpers import no CLI module at all."""

from __future__ import annotations

import ast
from pathlib import Path

import router.cli
import router.demo
import router.printing

CLI = Path(router.cli.__file__).parent


def imported(path: Path) -> set[str]:
    """Every module a file imports (`from router import cli` counted as `router.cli`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "router":
                names.update(f"router.{alias.name}" for alias in node.names)
    return names


def test_command_modules_import_only_the_common_module_of_the_cli() -> None:
    modules = sorted(p for p in CLI.glob("*.py") if p.name != "__init__.py")
    assert {p.stem for p in modules} >= {"common", "jobs", "demo", "http", "outbox"}
    for path in modules:
        cli_imports = {n for n in imported(path) if n.split(".")[:2] == ["router", "cli"]}
        assert cli_imports <= {"router.cli.common"}, (path.name, cli_imports)


def test_demo_and_printing_do_not_import_the_cli() -> None:
    for module in (router.demo, router.printing):
        path = Path(str(module.__file__))
        assert not {n for n in imported(path) if n.startswith("router.cli")}, path.name


def test_every_command_module_is_registered() -> None:
    """A module added under router/cli/ but never registered would be a command nobody sees."""
    registered = {
        info.callback.__module__
        for info in router.cli.app.registered_commands
        if info.callback is not None
    }
    registered |= {
        info.typer_instance.registered_commands[0].callback.__module__
        for info in router.cli.app.registered_groups
        if info.typer_instance is not None
        and info.typer_instance.registered_commands
        and info.typer_instance.registered_commands[0].callback is not None
    }
    modules = {f"router.cli.{p.stem}" for p in CLI.glob("*.py")} - {
        "router.cli.__init__",
        "router.cli.common",
    }
    assert registered == modules


def test_every_package_of_the_checkout_is_listed_for_the_wheel() -> None:
    """pyproject.toml lists the packages (the cassettes folder is mapped into the wheel as
    `router.cassettes`); a package added under router/, providers/ or contracts/ and not
    listed would be missing from an installed jobrouter."""
    import tomllib

    root = CLI.parents[1]
    setuptools = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    found = {
        ".".join(init.parent.relative_to(root).parts)
        for top in ("router", "providers", "contracts")
        for init in (root / top).rglob("__init__.py")
    }
    assert found | {"router.cassettes"} == set(setuptools["packages"])
    assert setuptools["package-dir"] == {"router.cassettes": "cassettes"}
