"""Mutation testing of the critical modules, with a score: `python -m tests.mutation`.

Runs mutmut (configured in pyproject.toml, `[tool.mutmut]`: which modules are mutated, which
tests run against each mutant), then prints the score (killed / (killed + survived + timeouts))
per module and overall, and every surviving mutant by function. Not part of CI.

Why a shadow tree: router/, providers/ and contracts/ are imported as `jobrouter`,
`jobrouter.providers` and `jobrouter.contracts` (package-dir), while mutmut 3 names a module
after its file's path and makes the tests import the mutated copy by that name. Run in this
repository it would call `router.gate` what the tests import as `jobrouter.gate` (and the
editable install would hand them the unmutated file): every mutant "no tests". So mutmut runs
in `.mutation/` (git-ignored), a src layout of the import names: `src/jobrouter/` is a copy of
router/ with providers/, contracts/ and cassettes/ copied inside it, `tests` links to this
repository's tests, and its pyproject.toml is this one with `[tool.mutmut]`'s paths (written
here in this repository's folders) rewritten to the tree's. Mutant names then read as the code
is imported (`jobrouter.gate.xǁGateǁforget__mutmut_1`). The tree is copied afresh at each run
(the copies keep their files' times, so mutmut's cache in `.mutation/mutants/` still knows an
unchanged file); `--mutmut ARGS` runs any mutmut command there (`--mutmut show <name>`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

MUTMUT = Path(sys.executable).with_name("mutmut")
REPO = Path(__file__).resolve().parent.parent
SHADOW = REPO / ".mutation"
# Where each import package's folder sits in the shadow tree (the src layout mutmut knows).
PACKAGES = {
    "router": "src/jobrouter",
    "providers": "src/jobrouter/providers",
    "contracts": "src/jobrouter/contracts",
    "cassettes": "src/jobrouter/cassettes",
}
# Fields of [tool.mutmut] that name source files, rewritten to the shadow tree's paths.
PATH_FIELDS = ("only_mutate", "do_not_mutate")


def shadow_path(path: str) -> str:
    """`router/gate.py` -> `src/jobrouter/gate.py`; `providers/x.py` -> under it, likewise."""
    folder, _, rest = path.partition("/")
    if folder not in PACKAGES:
        raise SystemExit(f"[tool.mutmut] names {path!r}, outside {', '.join(PACKAGES)}")
    return f"{PACKAGES[folder]}/{rest}" if rest else PACKAGES[folder]


def shadow_config(text: str) -> str:
    """pyproject.toml with its `[tool.mutmut]` table rewritten for the shadow tree."""
    config: dict[str, Any] = dict(tomllib.loads(text)["tool"]["mutmut"])
    config["source_paths"] = [PACKAGES["router"]]
    for field in PATH_FIELDS:
        if field in config:
            config[field] = [shadow_path(path) for path in config[field]]
    start = text.index("[tool.mutmut]")
    end = text.find("\n[", start + 1)
    table = "[tool.mutmut]\n" + "".join(f"{key} = {json.dumps(v)}\n" for key, v in config.items())
    return text[:start] + table + (text[end:] if end != -1 else "")


def lay_out_shadow() -> Path:
    """The shadow tree, its sources copied afresh (mutmut's cache `mutants/` is kept)."""
    src = SHADOW / "src"
    if src.exists():
        shutil.rmtree(src)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder, target in PACKAGES.items():  # router/ first: the others go inside its copy
        shutil.copytree(REPO / folder, SHADOW / target, ignore=ignore, dirs_exist_ok=True)
    tests = SHADOW / "tests"
    if not tests.is_symlink():
        tests.symlink_to(Path("..") / "tests")
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    (SHADOW / "pyproject.toml").write_text(shadow_config(pyproject), encoding="utf-8")
    return SHADOW


def mutmut(*args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MUTMUT), *args], cwd=SHADOW, capture_output=capture, text=True, check=False
    )


def results() -> list[tuple[str, str]]:
    """(mutant name, status) of every mutant of the last run."""
    done = mutmut("results", "--all", "true", capture=True)
    rows = []
    for line in done.stdout.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            rows.append((name, status))
    return rows


def report(rows: list[tuple[str, str]]) -> str:
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: dict[str, list[str]] = defaultdict(list)
    for name, status in rows:
        module = name.split(".x", 1)[0]
        by_module[module][status] += 1
        if status in ("survived", "timeout", "suspicious"):
            function = name.rsplit("__mutmut_", 1)[0]
            survivors[function].append(f"{name.rsplit('__mutmut_', 1)[1]} ({status})")
    lines = [f"{'module':36} killed  timeout  survived  no tests  not checked  score"]
    total: Counter[str] = Counter()
    for module, counts in sorted(by_module.items()):
        total.update(counts)
        lines.append(row(module, counts))
    lines.append(row("all", total))
    lines.append("")
    lines.append(f"survivors and timeouts ({sum(len(v) for v in survivors.values())}):")
    for function, names in sorted(survivors.items()):
        lines.append(f"  {function}: {', '.join(names)}")
    return "\n".join(lines)


def row(module: str, counts: Counter[str]) -> str:
    return (
        f"{module:36} {counts['killed']:6}  {counts['timeout']:7}  {counts['survived']:8}  "
        f"{counts['no tests']:8}  {counts['not checked']:11}  {score(counts)}"
    )


def score(counts: Counter[str]) -> str:
    """Killed over every mutant a test ran against; a timeout (a mutant that made a test loop
    forever) counts as killed, as mutmut counts it. A mutant no test reaches, or one a bounded
    run did not get to, is neither: it is listed as `no tests` / `not checked`."""
    caught = counts["killed"] + counts["timeout"]
    tested = caught + counts["survived"] + counts["suspicious"]
    return f"{100 * caught / tested:5.1f}%" if tested else "    -"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", help='mutant names or globs to run (e.g. "jobrouter.gate.*")'
    )
    parser.add_argument(
        "--max-children",
        type=int,
        default=1,
        help="parallel mutant runs (the machine's 2 cores are shared)",
    )
    parser.add_argument("--report-only", action="store_true", help="print the last run's score")
    parser.add_argument(
        "--mutmut", nargs=argparse.REMAINDER, help="run this mutmut command in the shadow tree"
    )
    args = parser.parse_args()
    if args.mutmut:
        return mutmut(*args.mutmut).returncode
    if not args.report_only:
        lay_out_shadow()
        mutmut("run", "--max-children", str(args.max_children), *args.names)
    print(report(results()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
