"""`python -m tests.typecheck [mypy args]`: mypy strict over the one import name `jobrouter`.

The repository keeps its top-level folders (router/, providers/, contracts/) and the build maps
them into the package `jobrouter` (pyproject.toml, `[tool.setuptools.package-dir]`). The editable
install reaches them through setuptools' import hook, which mypy cannot follow (it reads files, it
runs no finder: python/mypy#12313, pypa/setuptools#3518). So this builds the package as mypy must
see it, a tree of symbolic links made fresh on every run (`.typecheck/jobrouter/`: each entry of
router/ plus `providers` and `contracts`), runs mypy on it, and prints every path as the file in
the checkout, so an error points at the file to edit.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / ".typecheck"
# Where each part of the package lives in the checkout (pyproject.toml's package-dir).
MAPPED = {"providers": ROOT / "providers", "contracts": ROOT / "contracts"}


def build_tree() -> Path:
    package = TREE / "jobrouter"
    shutil.rmtree(TREE, ignore_errors=True)
    package.mkdir(parents=True)
    for entry in sorted((ROOT / "router").iterdir()):
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in MAPPED.items():
        (package / name).symlink_to(folder)
    return package


def checkout_path(line: str) -> str:
    """`.typecheck/jobrouter/providers/x.py:3: error` -> `providers/x.py:3: error`."""
    for name in MAPPED:
        line = line.replace(f".typecheck/jobrouter/{name}/", f"{name}/")
    return re.sub(r"\.typecheck/jobrouter/", "router/", line)


def main(args: list[str]) -> int:
    build_tree()
    env = {**os.environ, "MYPYPATH": str(TREE)}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    for line in (done.stdout + done.stderr).splitlines():
        print(checkout_path(line))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
