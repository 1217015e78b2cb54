"""The CLI's shape (router/cli/): the package registers its command modules by name, and no
command module imports the package that registers it (only its sibling `jobrouter.cli.common`);
the demo and the printing helpers import no CLI module at all."""

from __future__ import annotations

import ast
from pathlib import Path

import jobrouter.cli
import jobrouter.demo
import jobrouter.printing

CLI = Path(jobrouter.cli.__file__).parent


def imported(path: Path) -> set[str]:
    """Every module a file imports (`from jobrouter import cli` counted as `jobrouter.cli`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "jobrouter":
                names.update(f"jobrouter.{alias.name}" for alias in node.names)
    return names


def test_command_modules_import_only_the_common_module_of_the_cli() -> None:
    modules = sorted(p for p in CLI.glob("*.py") if p.name != "__init__.py")
    assert {p.stem for p in modules} >= {"common", "jobs", "demo", "http", "outbox"}
    for path in modules:
        cli_imports = {n for n in imported(path) if n.split(".")[:2] == ["jobrouter", "cli"]}
        assert cli_imports <= {"jobrouter.cli.common"}, (path.name, cli_imports)


def test_demo_and_printing_do_not_import_the_cli() -> None:
    for module in (jobrouter.demo, jobrouter.printing):
        path = Path(str(module.__file__))
        assert not {n for n in imported(path) if n.startswith("jobrouter.cli")}, path.name


def test_every_command_module_is_registered() -> None:
    """A module added under router/cli/ but never registered would be a command nobody sees."""
    registered = {f"jobrouter.cli.{module}" for module, _, _ in jobrouter.cli.COMMANDS.values()}
    modules = {f"jobrouter.cli.{p.stem}" for p in CLI.glob("*.py")} - {
        "jobrouter.cli.__init__",
        "jobrouter.cli.common",
    }
    assert registered == modules
