"""jobrouter as a user installs it, tried from outside the checkout.

- The wheel carries its data files and finds them through importlib.resources: installed into a
  folder outside the checkout, `jobrouter demo` replays the cassettes the wheel ships.
- One import name: the wheel puts nothing but `jobrouter` at the top of site-packages. Installed
  into a fresh venv beside PyContracts (whose own top-level module is `contracts`), then run from
  a project folder that has `contracts/`, `providers/` and `router/` folders of its own, the
  README's Python API example and `python -m jobrouter --version` work; the editable install of
  the README's set-up command passes the same test.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# Folders of data files: where they are in the checkout, where they are in the wheel (the
# repository's folders are mapped into the one package `jobrouter`).
DATA = {
    "cassettes": "jobrouter/cassettes",
    "contracts/library": "jobrouter/contracts/library",
    "router/store": "jobrouter/store",
    "router/ui/templates": "jobrouter/ui/templates",
    "router/ui/static": "jobrouter/ui/static",
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
    ".typecheck",
    "mutants",
    "*.db",
)
# Runs the installed copy, after checking it is the one imported (not the editable checkout).
RUN = (
    "import sys, jobrouter; from jobrouter.cli import main; "
    "assert jobrouter.__file__.startswith(sys.argv[1]), jobrouter.__file__; "
    "sys.argv = ['jobrouter', *sys.argv[2:]]; main()"
)
# PyPI's PyContracts installs a top-level module `contracts` (an sdist; pinned by its hash).
PYCONTRACTS = (
    "PyContracts==1.8.12 "
    "--hash=sha256:e76adbd832deec28b2045a6094c5bb779a0b2cb1105a23b3efafe723e2c9937a"
)
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("checkout") / "jobrouter"
    shutil.copytree(ROOT, copy, ignore=LEFTOVERS)
    return copy


@pytest.fixture(scope="module")
def wheel(source: Path) -> Path:
    dist = source.parent / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "-q", "wheel", "--no-deps", str(source), "-w", str(dist)],
        check=True,
        cwd=source.parent,
        timeout=600,
    )
    [built] = dist.glob("*.whl")
    return built


def test_the_wheel_installs_one_top_level_name(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    [info] = [top for top in tops if top.endswith(".dist-info")]
    assert tops == {"jobrouter", info}, sorted(tops)
    top_level = f"{info}/top_level.txt"
    if top_level in names:  # setuptools writes it; its content is the import names
        text = zipfile.ZipFile(wheel).read(top_level).decode()
        assert text.split() == ["jobrouter"], text
    for expected in (
        "jobrouter/__main__.py",
        "jobrouter/providers/adapter.py",
        "jobrouter/contracts/certify.py",
        "jobrouter/cassettes/jobrouter.toml",
    ):
        assert expected in names, expected


def test_an_installed_wheel_runs_the_demo_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
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
        [
            sys.executable,
            "-m",
            "pip",
            "-q",
            "install",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
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
            **OFFLINE,
        },
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "job calls: REPLAYED from cassettes/demo/product_title/jobs.yaml" in " ".join(
        done.stdout.split()
    )
    states = sqlite3.connect(db).execute("SELECT state FROM jobs").fetchall()
    assert sorted(states) == [("succeeded",)] * 3


# A user's own contract for the README's task, in the user's own `contracts/` folder (the path
# docs/contracts.md tells them to use); the stub answers its case as the contract expects.
CAPTION = """\
name: caption
version: 1
side_effects: none
prompt:
  system: "You write short social captions. Answer with JSON only."
  user: "Product: {{ product.name }}. Tone: {{ tone }}."
input_schema:
  type: object
  required: [product, tone]
  properties:
    product: {type: object, required: [name], properties: {name: {type: string}}}
    tone: {type: string}
output_schema: {type: object, required: [text], properties: {text: {type: string}}}
sampling: {temperature: 0, max_tokens: 60, repeats: 2, min_agreement: 1.0, agree_on: [text]}
cases:
  - name: tea
    input: {product: {name: Saffron tea}, tone: warm}
    expect:
      - {type: contains, path: text, value: tea}
"""
CONFIG = """\
[providers.stub]
model = "openai/stub"
api_base = "{api_base}"
transport = "openai"
context_window = 16384    # the stub serves any length; litellm does not know "openai/stub"

[tasks.caption]
contract = "contracts/caption.yaml"
providers = ["stub"]
"""


def readme_python_example() -> str:
    """The README's Python API example, exactly as printed there, run as a script."""
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme.split("## Python API", 1)[1]
    [block] = re.findall(r"```python\n(.*?)```", section, re.S)[:1]
    assert "from jobrouter import Router" in block, block
    imports, _, body = block.partition("\n\n")
    return (
        f"import asyncio\n{imports}\n\nasync def main():\n{textwrap.indent(body, '    ')}\n"
        "asyncio.run(main())\n"
    )


@pytest.fixture
def stub() -> Iterator[str]:
    """The benchmark's OpenAI-compatible stub, a real HTTP server, on a port it chose."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.stub_server", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **OFFLINE},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once it listens
    try:
        assert line.startswith("stub listening on "), line
        yield f"http://{line.split()[-1]}/v1"
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def project_folder(tmp_path: Path, api_base: str) -> Path:
    """A user's project: folders named like jobrouter's own, none of them jobrouter's."""
    project = tmp_path / "project"
    (project / "contracts").mkdir(parents=True)  # a plain folder: a namespace package candidate
    (project / "contracts" / "caption.yaml").write_text(CAPTION)
    (project / "providers").mkdir()
    (project / "providers" / "__init__.py").write_text("raise ImportError('the user\\'s own')\n")
    (project / "router").mkdir()
    (project / "router" / "__init__.py").write_text("ROUTES = ['/shop']\n")
    (project / "jobrouter.toml").write_text(CONFIG.format(api_base=api_base))
    (project / "example.py").write_text(readme_python_example())
    return project


def fresh_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "-q", "install", "--no-deps"]
    lock = ROOT / "requirements" / "runtime.lock"
    subprocess.run([*pip, "--require-hashes", "-r", str(lock)], check=True, timeout=900)
    (tmp_path / "pycontracts.txt").write_text(PYCONTRACTS + "\n")
    subprocess.run(
        [*pip, "--require-hashes", "-r", str(tmp_path / "pycontracts.txt")],
        check=True,
        timeout=600,
    )
    return venv


def run_as_a_user(venv: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(project),
        "COLUMNS": "120",
        **OFFLINE,
    }
    return subprocess.run(
        [str(venv / "bin" / "python"), *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def check_the_user_project(venv: Path, project: Path, installed_from: Path) -> None:
    site = next((venv / "lib").glob("python3*/site-packages"))

    def ok(*args: str) -> str:
        done = run_as_a_user(venv, project, *args)
        assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
        return done.stdout

    where = ok(
        "-c",
        "import jobrouter, jobrouter.contracts; "
        "print(jobrouter.__file__); print(jobrouter.contracts.__file__)",
    )
    assert all(line.startswith(str(installed_from)) for line in where.split()), where
    # `contracts` is PyContracts' (a regular package beats the project's plain folder), and
    # installing jobrouter overwrote none of its files
    origin = ok("-c", "import importlib.util; print(importlib.util.find_spec('contracts').origin)")
    assert origin.strip() == str(site / "contracts" / "__init__.py"), origin
    assert "contracts/main.py" in ok("-m", "pip", "show", "-f", "PyContracts")
    assert ok("-m", "jobrouter", "--version").strip() == "jobrouter 0.1.0"
    certified = ok("-m", "jobrouter", "contracts", "run", "--config", "jobrouter.toml")
    assert "pass" in certified, certified
    printed = ok("example.py").splitlines()
    assert printed[0].startswith("succeeded {'text': "), printed
    assert printed[1] == "1 stub succeeded None", printed


def test_one_import_name_beside_pycontracts_and_a_user_s_folders(
    wheel: Path, source: Path, stub: str, tmp_path: Path
) -> None:
    venv = fresh_venv(tmp_path)
    site = next((venv / "lib").glob("python3*/site-packages"))
    pip = [str(venv / "bin" / "python"), "-m", "pip", "-q"]

    subprocess.run([*pip, "install", "--no-deps", str(wheel)], check=True, timeout=600)
    project = project_folder(tmp_path, stub)
    check_the_user_project(venv, project, installed_from=site / "jobrouter")

    # the README's set-up: the editable install of a checkout (here the copy the wheel was built
    # from), run from the same project folder
    subprocess.run([*pip, "uninstall", "-y", "jobrouter"], check=True, timeout=600)
    (project / "jobrouter.db").unlink()
    subprocess.run(
        [*pip, "install", "--no-deps", "-e", str(source)], check=True, timeout=600, cwd=source
    )
    check_the_user_project(venv, project, installed_from=source)
