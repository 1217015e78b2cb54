"""An installed, non-editable wheel carries its data files and finds them through
importlib.resources: built with pip, installed into a folder outside the checkout, and
`jobrouter demo` run from there replays the cassettes the wheel ships."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Folders of data files: where they are in the checkout, where they are in the wheel (the
# top-level cassettes/ ships as the package router.cassettes).
DATA = {
    "cassettes": "router/cassettes",
    "contracts/library": "contracts/library",
    "router/store": "router/store",
    "router/ui/templates": "router/ui/templates",
    "router/ui/static": "router/ui/static",
}
# Built from a copy without the build's leftovers: a stale *.egg-info/SOURCES.txt would put files
# in the wheel that the package-data of pyproject.toml leaves out.
LEFTOVERS = shutil.ignore_patterns(
    ".git",
    ".venv",
    "*.egg-info",
    "build",
    "dist",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    "mutants",
    "*.db",
)
# Runs the installed copy, after checking it is the one imported (not the editable checkout).
RUN = (
    "import sys, router; from router.cli import main; "
    "assert router.__file__.startswith(sys.argv[1]), router.__file__; "
    "sys.argv = ['jobrouter', *sys.argv[2:]]; main()"
)


def test_an_installed_wheel_runs_the_demo_outside_the_checkout(tmp_path: Path) -> None:
    pip = [sys.executable, "-m", "pip", "-q"]
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=LEFTOVERS)
    subprocess.run(
        [*pip, "wheel", "--no-deps", str(source), "-w", str(tmp_path / "dist")],
        check=True,
        cwd=tmp_path,
        timeout=600,
    )
    [wheel] = (tmp_path / "dist").glob("*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    for folder, in_wheel in DATA.items():  # every data file of the checkout is in the wheel
        files = [
            p
            for p in (ROOT / folder).rglob("*")
            if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts
        ]
        assert files, folder
        missing = [
            str(p.relative_to(ROOT))
            for p in files
            if f"{in_wheel}/{p.relative_to(ROOT / folder)}" not in shipped
        ]
        assert not missing, missing
    site = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        cwd=tmp_path,
        timeout=600,
    )

    db = tmp_path / "demo.db"
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(site), "demo", "--database", f"sqlite:///{db}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "COLUMNS": "120",
            "PYTHONPATH": str(site),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_OFFLINE_MODE": "true",
        },
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "job calls: REPLAYED from cassettes/demo/product_title/jobs.yaml" in " ".join(
        done.stdout.split()
    )
    states = sqlite3.connect(db).execute("SELECT state FROM jobs").fetchall()
    assert sorted(states) == [("succeeded",)] * 3
