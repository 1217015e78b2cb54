"""Mutation testing of the critical modules, with a score: `python -m tests.mutation`.

Runs mutmut (configured in pyproject.toml, `[tool.mutmut]`: which modules are mutated, which
tests run against each mutant), then prints the score (killed / (killed + survived + timeouts))
per module and overall, and every surviving mutant by function. `mutmut show <name>` prints a
mutant's diff; `mutmut apply <name>` writes it into the source tree (revert with git). Results
are cached in `mutants/`: a second run only tests mutants of changed code. See docs/testing.md.
Not part of CI: it takes tens of minutes on two cores.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

MUTMUT = Path(sys.executable).with_name("mutmut")


def results() -> list[tuple[str, str]]:
    """(mutant name, status) of every mutant of the last run."""
    done = subprocess.run(
        [str(MUTMUT), "results", "--all", "true"], capture_output=True, text=True, check=True
    )
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
    lines = [f"{'module':30} killed  timeout  survived  no tests  not checked  score"]
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
        f"{module:30} {counts['killed']:6}  {counts['timeout']:7}  {counts['survived']:8}  "
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
        "--max-children",
        type=int,
        default=1,
        help="parallel mutant runs (the machine's 2 cores are shared)",
    )
    parser.add_argument("--report-only", action="store_true", help="print the last run's score")
    args = parser.parse_args()
    if not args.report_only:
        subprocess.run([str(MUTMUT), "run", "--max-children", str(args.max_children)], check=False)
    print(report(results()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
