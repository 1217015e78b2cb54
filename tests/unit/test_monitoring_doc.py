"""docs/monitoring.md's table of every metric is the registry's: each series `/metrics` serves
is a row, with its type and labels, and each row is a series the code exports."""

from __future__ import annotations

import re
from pathlib import Path

import jobrouter.leader  # these three register their metrics, as a running router does
import jobrouter.periodic
import jobrouter.probes  # noqa: F401
from jobrouter.metrics import REGISTRY

DOC = Path(__file__).resolve().parents[2] / "docs" / "monitoring.md"
ROW = re.compile(r"^\| `(jobrouter_[a-z_]+)` \| (\w+) \| ([^|]*) \|", re.MULTILINE)


def exported() -> dict[str, tuple[str, frozenset[str]]]:
    found = {}
    for family in REGISTRY.collect():
        collector = REGISTRY._names_to_collectors.get(family.name)
        labels = frozenset(getattr(collector, "_labelnames", ()))
        name = family.name + ("_total" if family.type == "counter" else "")
        found[name] = (family.type, labels)
    return found


def documented(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    table = text.split("## Every metric", 1)[1].split("\n## ", 1)[0]
    return {
        name: (kind, frozenset(re.findall(r"`([a-z_]+)`", labels)))
        for name, kind, labels in ROW.findall(table)
    }


def test_the_table_lists_every_metric_with_its_type_and_labels() -> None:
    assert documented(DOC.read_text("utf-8")) == exported()


def test_a_metric_missing_from_the_table_is_caught() -> None:
    """Mutant: the table without its `jobrouter_spend_usd_total` row."""
    text = DOC.read_text("utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `jobrouter_spend_usd_"))
    assert documented(text.replace(row + "\n", "")) != exported()
