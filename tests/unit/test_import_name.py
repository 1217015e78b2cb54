"""One import name, `jobrouter`, over the repository's three source folders, and the layers
between them: `jobrouter.providers` (providers/) imports no other part of jobrouter,
`jobrouter.contracts` (contracts/) only the providers, and the rest (router/) may use both.
The folders keep their names; the build maps them (pyproject.toml, package-dir). The wheel's
file list and an install beside PyContracts are checked in tests/acceptance/e2e/test_wheel.py."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import jobrouter
import jobrouter.errors

ROOT = Path(__file__).resolve().parents[2]
# folder of the checkout -> the package it is inside jobrouter
FOLDERS = {
    "router": "jobrouter",
    "providers": "jobrouter.providers",
    "contracts": "jobrouter.contracts",
}
# what each part may import of jobrouter (the layer rule: providers <- contracts <- router)
ALLOWED = {
    "providers": ("jobrouter.providers",),
    "contracts": ("jobrouter.contracts", "jobrouter.providers"),
}


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, `from jobrouter import x` counted as `jobrouter.x`; type-only
    imports included (a cycle of annotations is still a cycle for a reader)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def sources(*folders: str) -> list[Path]:
    return [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_a_lower_layer_imports_nothing_above_it(folder: str) -> None:
    upward = {
        (str(path.relative_to(ROOT)), name)
        for path in sources(folder)
        for name in imports_of(path)
        if (name == "jobrouter" or name.startswith("jobrouter."))
        and not name.startswith(ALLOWED[folder])
    }
    assert not upward, sorted(upward)


def test_nothing_imports_the_folders_by_their_own_names() -> None:
    """`router`, `providers` and `contracts` are folders, not import names: a user's folder of
    the same name (or PyContracts' `contracts`) would be imported instead."""
    old = {
        (str(path.relative_to(ROOT)), name)
        for path in sources("router", "providers", "contracts", "tests")
        for name in imports_of(path)
        if name.split(".")[0] in FOLDERS
    }
    assert not old, sorted(old)


def test_the_folders_are_the_parts_of_the_package() -> None:
    import jobrouter.contracts
    import jobrouter.providers

    for folder, package in FOLDERS.items():
        module = sys.modules[package]
        assert Path(str(module.__file__)).parent == ROOT / folder, (package, module.__file__)
    assert jobrouter.providers.__name__ == "jobrouter.providers"
    assert jobrouter.contracts.__name__ == "jobrouter.contracts"


def test_every_package_of_the_checkout_is_listed_for_the_wheel() -> None:
    """pyproject.toml lists the packages under their import names; a package added under one of
    the folders and not listed would be missing from an installed jobrouter."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    found = {
        ".".join([FOLDERS[folder], *init.parent.relative_to(ROOT / folder).parts])
        for folder in FOLDERS
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert found | {"jobrouter.cassettes"} == set(setuptools["packages"])
    assert setuptools["package-dir"] == {
        "jobrouter": "router",
        "jobrouter.providers": "providers",
        "jobrouter.contracts": "contracts",
        "jobrouter.cassettes": "cassettes",
    }
    script = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["scripts"]
    assert script == {"jobrouter": "jobrouter.cli:main"}


def test_every_public_error_is_importable_from_jobrouter() -> None:
    errors = {
        name
        for name, value in vars(jobrouter.errors).items()
        if isinstance(value, type) and issubclass(value, jobrouter.errors.JobRouterError)
    }
    assert errors >= {"JobRefused", "IdempotencyConflict", "JobRouterError", "JobNotFound"}
    missing = sorted(errors - set(jobrouter.__all__))
    assert not missing, missing
    for name in errors:
        assert getattr(jobrouter, name) is getattr(jobrouter.errors, name)
    assert jobrouter.Router.__module__ == "jobrouter.api"


def test_the_lower_layers_load_without_the_router() -> None:
    """Importing `jobrouter.providers` or `jobrouter.contracts` runs `jobrouter/__init__.py`
    first: it must not pull in the engine, the store or litellm (`Router` is resolved lazily)."""
    code = (
        "import sys, jobrouter.providers, jobrouter.contracts; "
        "print(sorted(m for m in sys.modules if m.startswith(('jobrouter.api', "
        "'jobrouter.engine', 'jobrouter.store', 'jobrouter.cli', 'litellm'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]", done.stdout
